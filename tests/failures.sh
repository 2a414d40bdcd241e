#!/bin/sh
# tests/failures.sh — after a failed `make check`, a short account of what
# failed: the FAIL and ERROR lines of test-suite.log, then for each failing
# test its first failing TAP lines with their diagnostics.  CI keeps only the
# tail of its output, where the summary alone would not say which test
# failed; this is printed last so that the tail does.
builddir=${1:-.}
log=$builddir/test-suite.log
[ -f "$log" ] || { echo "failures.sh: no $log"; exit 0; }
echo "==== what failed (from $log) ===="
grep -E '^(FAIL|ERROR|XPASS):' "$log" | head -40
for t in $(grep -E '^(FAIL|ERROR):' "$log" | sed -E 's/^[A-Z]+: ([^ ]+).*/\1/' | sort -u); do
    f=$builddir/$t.log
    [ -f "$f" ] || continue
    echo "---- $t ----"
    # each not ok line with the comment lines that follow it, 60 lines at most
    awk '/^not ok/ { print; p = 1; next } p && /^(#|FAIL:|ERROR:|XPASS:)/ { print; next } { p = 0 }' "$f" | head -60
    tail -n 3 "$f"
done
