#!/bin/sh
# tests/cpu-tap-all.sh — every CPU TAP program at once, in parallel, for
# tests/gpu-session.sh on a GPU machine's host CPU (which may have AVX-512,
# unlike the build machines: the loader then picks the avx512 builds, which
# this runs natively).  Each program runs under its own time limit
# (WEFT_CPU_TEST_SECONDS, 150 by default), WEFT_CPU_TEST_JOBS at a time
# (8); its whole output goes to stdout under a "=== name (exit N) ===" line,
# and one line per program to SUMMARY: exit status, ok and not-ok counts,
# the plan.  A crash shows as an exit status of 128 and more, or a plan
# that the counts do not reach.
#
#   sh tests/cpu-tap-all.sh SUMMARY [PREBUILT]
#
# PREBUILT: an unpacked tests/gpu-stage.sh archive (its cpu/ and
# testplugins/); without it, this build tree's programs (with
# WEFT_PLUGIN_PATH at its .libs, as tests/gpu-session.sh sets it).  Left out: the GPU
# programs, test_dlpack_torch (libtorch) and test_dist/test_ddp (mpirun's,
# through tests/dist.sh).
#
#   sh tests/cpu-tap-all.sh --list
#
# prints those programs (tests/test_NAME, one a line) and does nothing
# else: tests/gpu-stage.sh packs what it lists.
set -u
cd "$(dirname "$0")/.." || exit 2
# the build's TAP programs less the GPU, libtorch and mpirun ones
cpu_programs() {
    for p in $(make -s print-tap-tests); do
        case ${p##*/} in
        test_cuda* | test_hip* | test_sparse_cuda | test_nccl | test_dlpack_torch | test_dist | test_ddp) ;;
        *) echo "$p" ;;
        esac
    done
}
if [ "${1:-}" = --list ]; then
    cpu_programs
    exit 0
fi
summary=$1
pre=${2:-}
if [ -n "$pre" ]; then
    list=$(ls "$pre"/cpu/test_*)
    WEFT_TEST_PLUGIN_DIR=$pre/testplugins
else
    list=
    for p in $(cpu_programs); do
        list="$list $PWD/$p"
    done
    WEFT_TEST_PLUGIN_DIR=$PWD/tests/plugins/.libs
    WEFT_BUILDDIR=$PWD
    export WEFT_BUILDDIR
fi
WEFT_PYTHON=${WEFT_PYTHON:-python3}
export WEFT_TEST_PLUGIN_DIR WEFT_PYTHON
d=$(mktemp -d) || exit 2
trap 'rm -rf "$d"' EXIT
# shellcheck disable=SC2016
printf '%s\n' $list | xargs -P "${WEFT_CPU_TEST_JOBS:-8}" -I{} sh -c '
    n=$(basename "$1")
    timeout -k 5 "${WEFT_CPU_TEST_SECONDS:-150}" "$1" >"$2/$n.tap" 2>&1
    echo $? >"$2/$n.rc"' _ {} "$d"
: >"$summary"
fail=0
for f in "$d"/*.tap; do
    n=$(basename "$f" .tap)
    rc=$(cat "$d/$n.rc")
    [ "$rc" = 0 ] || fail=1
    echo "=== $n (exit $rc) ==="
    cat "$f"
    printf 'cpu %s: exit %s, ok %s, not ok %s, plan %s\n' "$n" "$rc" "$(grep -c '^ok' "$f")" \
        "$(grep -c '^not ok' "$f")" "$(grep -m1 '^1\.\.' "$f")" >>"$summary"
done
exit $fail
