#!/bin/sh
# tests/python_example.sh — the main job in Python (issue 15): runs
# examples/python/fashion_mnist.py briefly on Debian's Fashion-MNIST (a few
# hundred batches of the MLP, fewer of the CNN) and checks that it trains:
# the mean loss of its last three progress lines is below that of its first
# three, and the test accuracy is well above chance (10%).  Prints TAP.
builddir=$(cd "${WEFT_BUILDDIR:-.}" && pwd)
srcdir=$(cd "$(dirname "$0")/.." && pwd)
python=${WEFT_PYTHON:-python3}
data=${WEFT_FASHION_MNIST:-/usr/share/datasets/fashion-mnist}
if [ ! -f "$builddir/python/pkg/weft/_C.so" ]; then
    echo "1..0 # SKIP the Python module was not built (configure found no Python headers)"
    exit 0
fi
if [ ! -f "$data/train-images-idx3-ubyte.gz" ]; then
    echo "1..0 # SKIP no Fashion-MNIST in $data (apt-get install dataset-fashion-mnist)"
    exit 0
fi
PYTHONPATH="$builddir/python/pkg"
WEFT_PLUGIN_PATH=${WEFT_PLUGIN_PATH:-$builddir/.libs}
PYTHONDONTWRITEBYTECODE=1
export PYTHONPATH WEFT_PLUGIN_PATH PYTHONDONTWRITEBYTECODE
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0
fail=0
check() { # check MODEL BATCHES MIN-ACCURACY
    n=$((n + 1))
    if ! "$python" "$srcdir/examples/python/fashion_mnist.py" --model "$1" --epochs 1 \
        --limit "$2" --log-every 10 --threads 2 --data "$data" >"$tmp/out" 2>"$tmp/err"; then
        echo "not ok $n - $1: the example failed"
        sed 's/^/# /' "$tmp/out" "$tmp/err" | tail -20
        fail=1
        return
    fi
    # the mean loss of the first three progress lines against the last three
    # (one batch's loss is noisy)
    sed -n 's/.* loss \([0-9.]*\).*/\1/p' "$tmp/out" >"$tmp/losses"
    first=$(head -3 "$tmp/losses" | awk '{s += $1} END {if (NR == 3) printf "%.4f", s / 3}')
    last=$(tail -3 "$tmp/losses" | awk '{s += $1} END {if (NR == 3) printf "%.4f", s / 3}')
    acc=$(sed -n 's/.*test accuracy \([0-9.]*\)%.*/\1/p' "$tmp/out" | tail -1)
    if [ -n "$first" ] && [ -n "$last" ] && [ -n "$acc" ] &&
        awk -v f="$first" -v l="$last" -v a="$acc" -v m="$3" 'BEGIN {exit !(l < f && a >= m)}'; then
        echo "ok $n - $1, $2 batches: mean loss $first -> $last, test accuracy $acc% (>= $3%)"
    else
        echo "not ok $n - $1, $2 batches: loss '$first' -> '$last', test accuracy '$acc'% (want a falling loss and >= $3%)"
        sed 's/^/# /' "$tmp/out" "$tmp/err" | tail -20
        fail=1
    fi
}
check mlp 300 70
check cnn 100 50
echo "1..$n"
exit $fail
