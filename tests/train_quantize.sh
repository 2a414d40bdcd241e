#!/bin/sh
# tests/train_quantize.sh — weft-train --quantize (issue 17): a short run
# of the MLP and of the CNN on a subset of Fashion-MNIST, then their int8
# forms (calibrated, per-channel qint8 weights, quint8 activations, oneDNN):
# the JSON gains int8_test_accuracy, float_eval_seconds and
# int8_eval_seconds (and both as CPU seconds), and the int8 accuracy is
# within 1 point of the float model's; with --profile, the operators of one
# test pass of each model.  The speed is bench material (docs/benchmarks.md), not checked
# here.  TAP.
builddir=${WEFT_BUILDDIR:-.}
data=/usr/share/datasets/fashion-mnist
if [ ! -f "$data/train-images-idx3-ubyte.gz" ]; then
    echo "1..0 # SKIP $data is missing (./quickstart installs dataset-fashion-mnist)"
    exit 0
fi
n=0
fail=0
check() {
    n=$((n + 1))
    if [ "$1" = yes ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; echo "# output: $out"; fail=1; fi
}
for model in mlp cnn; do
    out=$("$builddir/weft-train" --model $model --limit 6000 --epochs 1 --seed 7 --json --quiet \
        --quantize 2>&1)
    if echo "$out" | grep -q "without oneDNN"; then
        n=$((n + 1))
        echo "ok $n # SKIP $model: the quantized plugin was built without oneDNN"
        continue
    fi
    field() { echo "$out" | sed -n "s/.*\"$1\": \([-0-9.e]*\).*/\1/p"; }
    acc=$(field test_accuracy)
    q=$(field int8_test_accuracy)
    fs=$(field float_eval_seconds)
    qs=$(field int8_eval_seconds)
    fc=$(field float_eval_cpu_seconds)
    qc=$(field int8_eval_cpu_seconds)
    check "$([ -n "$acc" ] && [ -n "$q" ] && [ -n "$fs" ] && [ -n "$qs" ] && [ -n "$fc" ] &&
        [ -n "$qc" ] && echo yes)" \
        "$model: the JSON has int8_test_accuracy, float_eval_seconds, int8_eval_seconds and their CPU seconds"
    check "$(awk -v a="${acc:-0}" -v b="${q:--100}" 'BEGIN { d = a - b; if (d < 0) d = -d; print (a > 65 && d <= 1) ? "yes" : "no" }')" \
        "$model: int8 test accuracy $q% within 1 point of float $acc% (float test set ${fs}s, int8 ${qs}s)"
done
# --profile with --quantize: one untimed pass of each model under the
# profiler, its operators printed (the int8 one's are the plugin's)
trace=$(mktemp)
out=$("$builddir/weft-train" --model cnn --limit 3000 --epochs 1 --quiet --quantize --profile "$trace" 2>&1)
rm -f "$trace"
if echo "$out" | grep -q "without oneDNN"; then
    n=$((n + 1))
    echo "ok $n # SKIP --profile: the quantized plugin was built without oneDNN"
else
    int8_table=$(echo "$out" | sed -n '/one pass of the int8 model/,$p')
    float_table=$(echo "$out" | sed -n '/one pass of the float model/,/one pass of the int8 model/p')
    check "$(echo "$float_table" | grep -q '^conv2d ' && echo "$int8_table" | grep -q '^quantized_conv2d ' &&
        echo "$int8_table" | grep -q '^quantized_linear ' && echo yes)" \
        "cnn --quantize --profile: a table of the float model's test pass (conv2d) and of the int8 model's (quantized_conv2d, quantized_linear)"
fi
echo "1..$n"
exit $fail
