#!/bin/sh
# tests/train.sh — a short weft-train run on a subset of Fashion-MNIST: the
# loss must fall and the test accuracy must be far above chance (10%), and
# the same seed must give the same numbers; its arguments' errors, where its
# output goes, and what --device best chooses among fake devices.  TAP.
builddir=${WEFT_BUILDDIR:-.}
data=/usr/share/datasets/fashion-mnist
if [ ! -f "$data/train-images-idx3-ubyte.gz" ]; then
    echo "1..0 # SKIP $data is missing (./quickstart installs dataset-fashion-mnist)"
    exit 0
fi
run() { "$builddir/weft-train" --limit 6000 --epochs 1 --seed 7 --json --quiet 2>&1; }
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
# batches built on the batch thread (the default) or in the loop: the same
# images in the same order, so the same numbers; 2 epochs (the thread must
# not build across the reshuffle) with a last batch of 6000 mod 64 = 48
noprefetch=$("$builddir/weft-train" --limit 6000 --epochs 2 --seed 7 --json --quiet --no-prefetch 2>&1)
prefetched=$("$builddir/weft-train" --limit 6000 --epochs 2 --seed 7 --json --quiet 2>&1)
check "$([ -n "$(strip "$noprefetch")" ] && [ "$(strip "$noprefetch")" = "$(strip "$prefetched")" ] && echo yes)" \
    "--no-prefetch gives the same numbers as batches built on the batch thread"
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

# Arguments: each bad value is a usage error (2) whose message says what is
# wrong with it, before any data is read.
usage_error() { # usage_error "ARGS" "MESSAGE"
    out=$("$builddir/weft-train" $1 2>&1)
    status=$?
    check "$([ $status -eq 2 ] && printf '%s\n' "$out" | grep -qF -- "$2" && echo yes)" \
        "weft-train $1: \"$2\" (exit status $status)"
}
usage_error "--lr abc" "--lr: 'abc' is not a finite number"
usage_error "--lr 0" "--lr must be positive (got 0)"
usage_error "--epochs 2x" "--epochs: '2x' is not a whole number"
usage_error "--batch-size 0" "--batch-size must be at least 1 (got 0)"
usage_error "--limit -5" "--limit must be at least 0 (got -5)"
usage_error "--seed -1" "--seed: '-1' is not a whole number"
usage_error "--momentum nan" "--momentum: 'nan' is not a finite number"
usage_error "--threads" "--threads needs a value"
usage_error "--frobnicate" "unknown option '--frobnicate'"
help=$("$builddir/weft-train" --help)
check "$(printf '%s\n' "$help" | grep -A1 -- '--limit N' | grep -q '0 (the' && echo yes)" \
    "--help says what --limit 0 means (all of the images)"

# --json: the result alone on stdout, progress on stderr; --quiet: none
errfile=$(mktemp)
out=$("$builddir/weft-train" --limit 640 --epochs 1 --seed 7 --log-every 5 --json 2>"$errfile")
check "$([ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] && printf '%s\n' "$out" | grep -q '^{.*"test_accuracy"' &&
    grep -q '^epoch 1  step     5/10' "$errfile" && grep -q '^epoch 1  test accuracy' "$errfile" && echo yes)" \
    "--json: one JSON line on stdout, the progress on stderr"
out=$("$builddir/weft-train" --limit 640 --epochs 1 --seed 7 --json --quiet 2>"$errfile")
check "$([ ! -s "$errfile" ] && printf '%s\n' "$out" | grep -q '^{.*"test_accuracy"' && echo yes)" \
    "--json --quiet: nothing on stderr"
out=$("$builddir/weft-train" --limit 640 --epochs 1 --seed 7 --quiet 2>"$errfile")
check "$([ ! -s "$errfile" ] && [ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] &&
    printf '%s\n' "$out" | grep -q '^test accuracy [0-9.]*%; trained in' && echo yes)" \
    "--quiet: only the result line"

# --device best among fake devices (tests/plugins): hostdev says it is
# emulated, testdev (good.c) does not say, accdev claims to be an
# accelerator.  Only accdev may be chosen, and the choice says why.
fakes=$(mktemp -d)
trap 'rm -rf "$fakes" "$errfile"' EXIT
plugins=${WEFT_TEST_PLUGIN_DIR:-$builddir/tests/plugins/.libs}
ln -s "$plugins/test-hostdev.so" "$fakes/libweft-hostdev.so"
ln -s "$plugins/test-good.so" "$fakes/libweft-good.so"
best() { WEFT_PLUGIN_PATH="$WEFT_PLUGIN_PATH:$fakes" WEFT_CPU_FALLBACK=silent \
    "$builddir/weft-train" --limit 640 --epochs 1 --seed 7 --json 2>"$errfile"; }
out=$(best)
check "$(printf '%s\n' "$out" | grep -q '"device": "cpu"' &&
    grep -q '^weft-train: --device best chose cpu: no accelerator device is present; passed over' "$errfile" &&
    grep -q 'hostdev: emulated (its work runs on the CPU)' "$errfile" &&
    grep -q 'testdev: its plugin does not say what kind of device it is' "$errfile" && echo yes)" \
    "--device best trains on the CPU, not on an emulated device or one of unknown kind, and says why"
[ -f "$errfile" ] && sed 's/^/# /' "$errfile" | head -3
ln -s "$plugins/test-accdev.so" "$fakes/libweft-accdev.so"
out=$(best)
check "$(printf '%s\n' "$out" | grep -q '"device": "accdev:0"' &&
    grep -q '^weft-train: --device best chose accdev:0: the first accelerator; passed over .*hostdev: emulated' "$errfile" &&
    echo yes)" "--device best trains on the accelerator accdev:0, and says why"
[ -f "$errfile" ] && sed 's/^/# /' "$errfile" | head -3

# --profile FILE (issue 19): the trace of the first steps, a JSON file with
# their ranges and operators, and the top operators printed at the end; an
# unwritable FILE is an error naming it, and leaves nothing behind
prof=$(mktemp -d)
out=$("$builddir/weft-train" --limit 640 --epochs 1 --seed 7 --quiet --profile "$prof/t.json" \
    --profile-steps 2 2>&1)
status=$?
check "$([ $status -eq 0 ] && printf '%s\n' "$out" | grep -q 'the trace of 2 step(s) is in' &&
    printf '%s\n' "$out" | grep -q '^Name  *Self CPU %' &&
    printf '%s\n' "$out" | grep -q '^Self CPU time total:' && echo yes)" \
    "--profile prints the top operators (exit status $status)"
python=${WEFT_PYTHON:-python3}
checked=$("$python" -c '
import json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
x = [e["name"] for e in ev if e["ph"] == "X"]
assert x.count("step 0") == 1 and x.count("step 1") == 1 and "step 2" not in x, x[:20]
assert "addmm" in x and "cross_entropy" in x, sorted(set(x))
assert any(e["ph"] == "C" for e in ev) and any(e["ph"] == "f" for e in ev)
print("ok")' "$prof/t.json" 2>&1)
check "$([ "$checked" = ok ] && echo yes)" "--profile FILE: a Chrome trace of 2 steps (ranges, operators, memory, flows)"
[ "$checked" = ok ] || echo "$checked" | sed 's/^/# /' | tail -3
out=$("$builddir/weft-train" --limit 640 --epochs 1 --seed 7 --quiet --profile "$prof/no/t.json" 2>&1)
status=$?
check "$([ $status -eq 1 ] && printf '%s\n' "$out" | grep -qF -- "--profile: weft_profiler_export_chrome_trace: cannot write '$prof/no/t.json'" &&
    [ "$(ls "$prof")" = t.json ] && echo yes)" "--profile to a missing directory: an error naming it (exit status $status)"
rm -rf "$prof"
echo "1..$n"
exit $fail
