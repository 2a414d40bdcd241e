#!/bin/sh
# tests/gpu-session.sh — the whole work of a session on a GPU machine, in
# one call (issue 6): builds weft with the CUDA plugin from this working
# tree, runs the CUDA TAP programs, the conformance kit on cuda:0, the
# DLPack round trip with PyTorch (SKIPs without torch.cuda), the CUDA
# benchmark (and PyTorch's rows when torch.cuda is importable), and
# `weft-train --device cuda` for both models for one epoch.  Everything is
# logged under OUT (first argument, else $OUT, else ./gpu-session-out) in
# at most 8 files, and the whole run keeps under 9 minutes: every step's
# time limit is cut to what is left of the budget.
#
#   summary.txt  one line per step: its status and seconds
#   build.log    configure and make
#   tests.log    test_cuda, test_cuda_nn, test_cuda_index (TAP) and the Python
#                DLPack test
#   conformance.log  weft-conformance cuda:0
#   bench.jsonl  bench/cuda-bench rows, then bench/cuda-torch.py's
#   train.log    weft-train mlp and cnn (--json lines at the end of each)
#   info.log     nvidia-smi, weft-info, the toolkit's and driver's versions
#
# The machine needs the project's Debian image with the CUDA toolkit (it
# reaches nothing outside); nothing here needs the network.
set -u
out=${1:-${OUT:-gpu-session-out}}
mkdir -p "$out"
out=$(cd "$out" && pwd)
src=$(cd "$(dirname "$0")/.." && pwd)
cd "$src" || exit 2
start=$(date +%s)
budget=${WEFT_GPU_SESSION_SECONDS:-530}
jobs=$(nproc 2>/dev/null || echo 4)
: >"$out/summary.txt"

elapsed() { echo $(($(date +%s) - start)); }
# limit CAP: the seconds a step may take, CAP or what is left if less
limit() {
    left=$((budget - $(elapsed)))
    [ "$left" -lt "$1" ] && echo "$left" || echo "$1"
}
# step NAME CAP LOG COMMAND...: runs the command under its limit, appends
# its output to LOG, and records the outcome in summary.txt
step() {
    name=$1 cap=$2 log=$3
    shift 3
    t=$(limit "$cap")
    if [ "$t" -le 5 ]; then
        echo "SKIPPED $name: the session's ${budget}s are spent" >>"$out/summary.txt"
        return 1
    fi
    s0=$(elapsed)
    echo "=== $name (limit ${t}s) ===" >>"$log"
    timeout -k 5 "$t" "$@" >>"$log" 2>&1
    rc=$?
    status=ok
    [ "$rc" -ne 0 ] && status="FAILED rc=$rc"
    [ "$rc" -eq 124 ] && status="TIMED OUT after ${t}s"
    echo "$status $name $(($(elapsed) - s0))s" >>"$out/summary.txt"
    return "$rc"
}

{
    nvidia-smi 2>&1
    echo
    /usr/local/cuda/bin/nvcc --version 2>&1 | tail -2
} >"$out/info.log"

# ------------------------------------------------------------- build
# configure only when the tree is not configured with the CUDA plugin yet
build='if [ ! -f config.status ] || ! grep -q "S\\[\"HAVE_CUDA_TRUE\"\\]=\"\"" config.status; then
    autoreconf -fi && ./configure --with-cuda CUDA_ARCHS="${CUDA_ARCHS:-90}" || exit 1
fi
make -j"$0"'
if ! step build 300 "$out/build.log" sh -c "$build" "$jobs"; then
    tail -40 "$out/build.log" >>"$out/summary.txt"
    cat "$out/summary.txt"
    exit 1
fi
export WEFT_PLUGIN_PATH="$src/.libs"
./weft-info >>"$out/info.log" 2>&1

# ------------------------------------------------------------- tests
step test_cuda 90 "$out/tests.log" ./tests/test_cuda
step test_cuda_nn 120 "$out/tests.log" ./tests/test_cuda_nn
step test_cuda_index 90 "$out/tests.log" ./tests/test_cuda_index
# the products again through gemm.cu's tiled GEMM, the one the HIP build
# (no hipBLAS) runs: an NVIDIA GPU is where that kernel can be checked
step test_cuda_tiled_gemm 90 "$out/tests.log" env WEFT_CUDA_GEMM=tiled ./tests/test_cuda
# and the portability header's test program with its kernel run (the first
# architecture of CUDA_ARCHS)
gpu_arch=${CUDA_ARCHS:-90}
gpu_arch=${gpu_arch%% *}
step gpu_portable 120 "$out/tests.log" env WEFT_NVCC=/usr/local/cuda/bin/nvcc \
    WEFT_NVCC_FLAGS="-gencode arch=compute_$gpu_arch,code=sm_$gpu_arch" sh tests/gpu_portable.sh
py=/usr/bin/python3
[ -x "$py" ] || py=python3
PYTHONPATH="$src/python/pkg:$src/tests/python"
PYTHONDONTWRITEBYTECODE=1
export PYTHONPATH PYTHONDONTWRITEBYTECODE
step dlpack_torch_cuda 30 "$out/tests.log" "$py" tests/python/test_torch_cuda.py
grep -c '^ok' "$out/tests.log" | sed 's/^/tests: ok lines /' >>"$out/summary.txt"
grep '^not ok' "$out/tests.log" | head -30 >>"$out/summary.txt"
step conformance 60 "$out/conformance.log" ./weft-conformance cuda:0
grep '^not ok' "$out/conformance.log" | head -20 >>"$out/summary.txt"

# ----------------------------------------------------------- benchmark
step bench_weft 90 "$out/bench.jsonl" ./bench/cuda-bench
step bench_torch 60 "$out/bench.jsonl" "$py" bench/cuda-torch.py

# ------------------------------------------------------------ training
step train_mlp 60 "$out/train.log" ./weft-train --model mlp --device cuda --epochs 1 --json
step train_cnn 90 "$out/train.log" ./weft-train --model cnn --device cuda --epochs 1 --json
echo "total $(elapsed)s of ${budget}s" >>"$out/summary.txt"
cat "$out/summary.txt"
