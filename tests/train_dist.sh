#!/bin/sh
# tests/train_dist.sh — the main job distributed (issue 18): weft-train on a
# subset of Fashion-MNIST in one process, then under mpirun -np 2 with
# --distributed (each rank half of every batch of 64); the test accuracy
# must be within 0.5 points of the single process's, rank 0 alone prints,
# and the other rank prints nothing.  TAP.
builddir=$(cd "${WEFT_BUILDDIR:-.}" && pwd)
data=/usr/share/datasets/fashion-mnist
if [ ! -f "$data/train-images-idx3-ubyte.gz" ]; then
    echo "1..0 # SKIP $data is missing (./quickstart installs dataset-fashion-mnist)"
    exit 0
fi
if ! command -v mpirun >/dev/null 2>&1 || [ ! -f "$builddir/.libs/libweftdist-mpi.so" ]; then
    echo "1..0 # SKIP mpirun or the mpi backend is missing (./quickstart installs them)"
    exit 0
fi
WEFT_PLUGIN_PATH="$builddir/.libs${WEFT_PLUGIN_PATH:+:$WEFT_PLUGIN_PATH}"
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader
export WEFT_PLUGIN_PATH OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM OMPI_MCA_btl
args="--limit 6000 --epochs 1 --seed 7 --threads 1 --json"
single=$("$builddir/weft-train" $args --quiet 2>&1)
dist=$(timeout 300 mpirun --oversubscribe -np 2 "$builddir/weft-train" $args --distributed 2>/dev/null)
rc=$?
n=0
fail=0
check() {
    n=$((n + 1))
    if [ "$1" = yes ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; echo "# single: $single"; echo "# distributed: $dist"; fail=1; fi
}
acc() { echo "$1" | sed -n 's/.*"test_accuracy": \([-0-9.e]*\).*/\1/p'; }
a1=$(acc "$single")
a2=$(acc "$dist")
check "$([ $rc -eq 0 ] && echo yes)" "mpirun -np 2 weft-train --distributed exits 0"
check "$([ "$(echo "$dist" | grep -c '"test_accuracy"')" = 1 ] && echo yes)" \
    "one JSON result: rank 0 alone prints"
check "$(awk -v a="$a1" -v b="$a2" 'BEGIN { d = a - b; if (d < 0) d = -d; print (a != "" && b != "" && d <= 0.5) ? "yes" : "no" }')" \
    "test accuracy with 2 ranks ($a2%) within 0.5 points of one process ($a1%)"
echo "1..$n"
exit $fail
