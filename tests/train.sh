#!/bin/sh
# tests/train.sh — a short weft-train run on a subset of Fashion-MNIST: the
# loss must fall and the test accuracy must be far above chance (10%), and
# the same seed must give the same numbers.  TAP.
builddir=${WEFT_BUILDDIR:-.}
data=/usr/share/datasets/fashion-mnist
if [ ! -f "$data/train-images-idx3-ubyte.gz" ]; then
    echo "1..0 # SKIP $data is missing (./quickstart installs dataset-fashion-mnist)"
    exit 0
fi
run() { "$builddir/weft-train" --limit 6000 --epochs 1 --seed 7 --json 2>&1; }
out=$(run)
again=$(run)
field() { echo "$out" | sed -n "s/.*\"$1\": \([-0-9.e]*\).*/\1/p"; }
first=$(field first_loss)
final=$(field final_loss)
acc=$(field test_accuracy)
n=0
fail=0
check() {
    n=$((n + 1))
    if [ "$1" = yes ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; echo "# output: $out"; fail=1; fi
}
valid=$([ -n "$first" ] && [ -n "$final" ] && [ -n "$acc" ] && echo yes)
check "$valid" "weft-train ends with a JSON object"
[ "$valid" = yes ] || { first=nan final=nan acc=0; }
check "$(awk -v a="$first" -v b="$final" 'BEGIN { print (a != "nan" && b + 0 < a / 2) ? "yes" : "no" }')" \
    "the loss falls (first batch $first, last batch $final)"
check "$(awk -v a="$acc" 'BEGIN { print (a > 65) ? "yes" : "no" }')" \
    "test accuracy after 94 steps on 6000 images is $acc% (> 65%)"
strip() { echo "$1" | sed 's/"train_seconds".*//'; }
check "$([ "$valid" = yes ] && [ "$(strip "$out")" = "$(strip "$again")" ] && echo yes)" \
    "the same seed gives the same numbers"
cnn=$("$builddir/weft-train" --model cnn --limit 2000 --epochs 1 --seed 7 --json 2>&1)
cfirst=$(echo "$cnn" | sed -n 's/.*"first_loss": \([-0-9.e]*\).*/\1/p')
cfinal=$(echo "$cnn" | sed -n 's/.*"final_loss": \([-0-9.e]*\).*/\1/p')
[ -n "$cfirst" ] && [ -n "$cfinal" ] || { cfirst=nan cfinal=nan out=$cnn; }
check "$(awk -v a="$cfirst" -v b="$cfinal" 'BEGIN { print (a != "nan" && b + 0 < a * 0.75) ? "yes" : "no" }')" \
    "the CNN trains too (first batch $cfirst, last batch $cfinal)"
saved=$(mktemp)
"$builddir/weft-train" --limit 640 --epochs 1 --seed 7 --json --save "$saved" >/dev/null 2>&1
status=$?
check "$([ $status -eq 0 ] && [ "$(head -c 8 "$saved")" = WEFTPARM ] && echo yes)" \
    "--save writes a parameter file (exit status $status)"
rm -f "$saved"
# --save FILE.safetensors: the same state in the safetensors format, read
# back by weft.load (and by the safetensors package with torch where
# tests/python.sh's venv has it) equal to the parameter file's
st=$(mktemp -d)
"$builddir/weft-train" --limit 640 --epochs 1 --seed 7 --save "$st/m.safetensors" >/dev/null 2>&1
"$builddir/weft-train" --limit 640 --epochs 1 --seed 7 --save "$st/m.weft" >/dev/null 2>&1
compare='
import sys, weft
a, b = weft.load(sys.argv[1]), weft.load(sys.argv[2])
assert list(a) == list(b) and len(a) > 0, (list(a), list(b))
assert all(a[k].tolist() == b[k].tolist() for k in a)
try:
    from safetensors.torch import load_file
except ImportError:
    sys.exit(0)
c = load_file(sys.argv[1])
assert all(c[k].tolist() == a[k].tolist() for k in a)
print("torch too")'
python=${WEFT_PYTHON:-python3}
if [ ! -f "$builddir/python/pkg/weft/_C.so" ]; then
    n=$((n + 1))
    echo "ok $n - --save FILE.safetensors # SKIP the Python package (which reads it back) was not built"
else
    py=$python
    [ -f "$builddir/tests/python-venv-safetensors/.ready" ] && py=$builddir/tests/python-venv-safetensors/bin/python
    how=$(PYTHONPATH="$builddir/python/pkg" WEFT_PLUGIN_PATH="$builddir/.libs" PYTHONDONTWRITEBYTECODE=1 \
        "$py" -c "$compare" "$st/m.safetensors" "$st/m.weft" 2>&1) && good=yes || good=no
    check "$good" "--save FILE.safetensors writes the state in safetensors, equal to the parameter file's ${how:+($how)}"
    [ $good = yes ] || echo "$how" | sed 's/^/# /'
fi
rm -rf "$st"
adam=$("$builddir/weft-train" --limit 640 --epochs 1 --seed 7 --optimizer adam --lr 0.001 --json 2>&1)
check "$(echo "$adam" | grep -q '"device": "cpu", "optimizer": "adam"' && echo yes)" \
    "--optimizer adam trains, and --device best is the CPU when no other device is loaded"
"$builddir/weft-train" --optimizer rmsprop >/dev/null 2>&1
status=$?
check "$([ $status -eq 2 ] && echo yes)" "an unknown --optimizer is a usage error (exit status $status)"
echo "1..$n"
exit $fail
