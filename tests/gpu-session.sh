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
#   tests.log    test_cuda, test_cuda_nn, test_cuda_index, test_nccl (TAP) and the Python
#                DLPack test
#   conformance.log  weft-conformance cuda:0
#   bench.jsonl  bench/cuda-bench rows, then bench/cuda-torch.py's
#   train.log    weft-train mlp and cnn (--json lines at the end of each)
#   info.log     nvidia-smi, weft-info, the toolkit's and driver's versions
#   cpu.log      the host CPU (lscpu), then every CPU TAP program under the
#                CPU plugin variant the loader picks there, quant-bench and
#                weft-train --quantize: the host of a GPU machine may have
#                AVX-512 and VNNI, which the build machines lack, so the
#                avx512 builds' tests and int8 speed run natively only here
# summary.txt also gets the first "not ok" lines of tests.log and cpu.log.
# WEFT_GPU_SESSION_STEPS (a regular expression over the step names below)
# runs only those steps.
#
# The machine needs the project's Debian image with the CUDA toolkit (it
# reaches nothing outside); nothing here needs the network.
#
# --prebuilt DIR: run the programs of an archive tests/gpu-stage.sh made
# and the caller unpacked in DIR, instead of building: for a lent machine
# whose image has no Autotools or OpenBLAS (this workplace's CUDA image).
# The Python extension is then compiled there, against that machine's
# python3 (the one with its CUDA PyTorch), for the DLPack test.
set -u
pre=
if [ "${1:-}" = --prebuilt ]; then
    pre=$(cd "$2" && pwd) || exit 2
    shift 2
fi
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
# WEFT_GPU_SESSION_STEPS: an extended regular expression; only the steps
# whose names match run (a second call that reruns what the first found)
step() {
    name=$1 cap=$2 log=$3
    shift 3
    if [ -n "${WEFT_GPU_SESSION_STEPS:-}" ] &&
        ! printf '%s\n' "$name" | grep -q -x -E "$WEFT_GPU_SESSION_STEPS"; then
        echo "SKIPPED $name: not in WEFT_GPU_SESSION_STEPS" >>"$out/summary.txt"
        return 0
    fi
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
    nvcc=/usr/local/cuda/bin/nvcc
    [ -x "$nvcc" ] || nvcc=nvcc
    "$nvcc" --version 2>&1 | tail -2
} >"$out/info.log"

# ------------------------------------------------------------- build
nvcc=/usr/local/cuda/bin/nvcc
[ -x "$nvcc" ] || nvcc=$(command -v nvcc || echo nvcc)
py=/usr/bin/python3
[ -n "$pre" ] || [ ! -x "$py" ] && py=python3
data=/usr/share/datasets/fashion-mnist
if [ -n "$pre" ]; then
    # the CUDA libraries where this image keeps them: the toolkit's
    # folder, else the pip wheels beside its PyTorch
    cudalibs=
    for so in libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libcudnn.so.9 libnccl.so.2 \
        libcusparse.so.12; do
        d=$(ls -d /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib 2>/dev/null |
            while read -r d; do [ -e "$d/$so" ] && echo "$d" && break; done)
        [ -n "$d" ] || d=$(find /usr/local /opt /usr/lib -name "$so" 2>/dev/null | head -1 | xargs -r dirname)
        [ -n "$d" ] && case ":$cudalibs:" in *":$d:"*) ;; *) cudalibs=$cudalibs:$d ;; esac
        echo "$so: ${d:-not found}" >>"$out/info.log"
    done
    LD_LIBRARY_PATH="$pre/lib:$pre/deps$cudalibs:$pre/deps-cuda${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    export LD_LIBRARY_PATH
    ldd "$pre/bin/test_cuda" "$pre/lib/libweft-cuda.so" "$pre/lib/libweft-cpu.so" >>"$out/info.log" 2>&1
    bin=$pre/bin
    data=$pre/data
    # the Python extension, for this machine's python3, with the headers
    # configure and the generators made here (the archive's gen/)
    pyext='set -e
    inc=$("$0" -c "import sysconfig; print(sysconfig.get_paths()[\"include\"])")
    mkdir -p "$1/py/weft"
    for f in "$PWD"/python/weft/*; do ln -sfn "$f" "$1/py/weft/"; done
    mkdir -p "$1/pyobj"
    # one compiler per source, all cores at once (a single gcc over every
    # file took a minute of the session)
    ls python/*.c tools/info_report.c | xargs -P "$2" -I{} sh -c '\''gcc -c -fPIC -O1 -std=gnu11 \
        -fvisibility=hidden -pthread -fno-strict-aliasing -DHAVE_CONFIG_H -I"$1/gen" -I"$1/gen/include" \
        -I. -Iinclude -I"$2" "$3" -o "$1/pyobj/$(basename "$3" .c).o"'\'' _ "$1" "$inc" {}
    gcc -shared -pthread "$1"/pyobj/*.o -L"$1/lib" -l:libweft.so.1 -o "$1/py/weft/_C.so"'
    step python_extension 120 "$out/build.log" sh -c "$pyext" "$py" "$pre" "$jobs"
    pypath=$pre/py
else
    build='if [ ! -f config.status ] || ! grep -q "S\\[\"HAVE_CUDA_TRUE\"\\]=\"\"" config.status; then
    autoreconf -fi && ./configure --with-cuda CUDA_ARCHS="${CUDA_ARCHS:-90}" || exit 1
fi
make -j"$0" || exit 1
# the nccl backend'"'"'s test program, where configure found NCCL
if grep -q "S\\[\"HAVE_NCCL_TRUE\"\\]=\"\"" config.status; then make -j"$0" tests/test_nccl; fi
make -j"$0" tests/test_sparse_cuda'
    if ! step build 300 "$out/build.log" sh -c "$build" "$jobs"; then
        tail -40 "$out/build.log" >>"$out/summary.txt"
        cat "$out/summary.txt"
        exit 1
    fi
    export WEFT_PLUGIN_PATH="$src/.libs"
    bin=
    pypath=$src/python/pkg
fi
[ -n "$pre" ] && export WEFT_PLUGIN_PATH="$pre/lib"
# P NAME: the path of a program of the build (its libtool wrapper) or of
# the unpacked archive
P() {
    if [ -n "$bin" ]; then echo "$bin/${1##*/}"; else echo "./$1"; fi
}
"$(P weft-info)" >>"$out/info.log" 2>&1

# ------------------------------------------------------------- tests
# in the order of what a short session most needs to learn: the kernels'
# comparisons with the CPU, then the numbers, then the rest
PYTHONPATH="$pypath:$src/tests/python"
PYTHONDONTWRITEBYTECODE=1
PYTHONUNBUFFERED=1
export PYTHONPATH PYTHONDONTWRITEBYTECODE PYTHONUNBUFFERED
# line-buffered, so that a crash shows the last check before it
lb=
command -v stdbuf >/dev/null 2>&1 && lb="stdbuf -oL"
# the sparse layouts on CUDA (libweft-sparse_cuda.so, cuSPARSE) first:
# the step a short session most needs
step test_sparse_cuda 60 "$out/tests.log" $lb "$(P tests/test_sparse_cuda)"
step test_cuda 60 "$out/tests.log" $lb "$(P tests/test_cuda)"
if [ -n "$pre" ] && [ -d "$pre/asan" ]; then
    # the AddressSanitizer build (tests/gpu-stage.sh); the CUDA runtime
    # maps memory where ASan keeps its shadow gap, hence protect_shadow_gap=0
    step test_cuda_asan 120 "$out/tests.log" env \
        LD_LIBRARY_PATH="$pre/asan/lib:$pre/asan/deps:$LD_LIBRARY_PATH" WEFT_PLUGIN_PATH="$pre/asan/lib" \
        ASAN_OPTIONS=protect_shadow_gap=0:detect_leaks=0:replace_intrin=0 "$pre/asan/bin/test_cuda"
fi
step test_cuda_nn 90 "$out/tests.log" $lb "$(P tests/test_cuda_nn)"
# the convolutions again with cuDNN's algorithms timed for every problem
step test_cuda_nn_cudnn_find 90 "$out/tests.log" env WEFT_CUDNN_FIND=always $lb "$(P tests/test_cuda_nn)"
step test_cuda_index 60 "$out/tests.log" $lb "$(P tests/test_cuda_index)"
# the nccl collective backend in a world of one (where it was built)
if [ -x "$(P tests/test_nccl)" ]; then
    step test_nccl 90 "$out/tests.log" $lb "$(P tests/test_nccl)"
fi
grep -c '^ok' "$out/tests.log" | sed 's/^/tests: ok lines /' >>"$out/summary.txt"
grep '^not ok' "$out/tests.log" | head -40 >>"$out/summary.txt"

# ------------------------------------------------------- the host CPU
# lscpu, then the CPU's TAP programs in parallel (each under its own time
# limit, its output kept whole in cpu.log, its exit status and counts in a
# line of summary.txt), then the int8 and block-format numbers
{
    echo "=== lscpu ==="
    lscpu 2>&1 || grep -m1 -E '^(model name|flags)' /proc/cpuinfo
    echo "=== weft-info (the CPU variant chosen here) ==="
    "$(P weft-info)" 2>&1 | grep -i -E 'cpu|quantized'
} >"$out/cpu.log"
step cpu_tests 200 "$out/cpu.log" sh tests/cpu-tap-all.sh "$out/cpu-summary" "$pre"
[ -f "$out/cpu-summary" ] && cat "$out/cpu-summary" >>"$out/summary.txt" && rm -f "$out/cpu-summary"
grep '^not ok' "$out/cpu.log" | head -40 >>"$out/summary.txt"
qb=$(P bench/quant-bench)
[ -n "$pre" ] && qb=$pre/cpu/quant-bench
step cpu_quant_bench 60 "$out/cpu.log" "$qb"
# the AVX2 block kernels on the same CPU, for the AVX-512 ones' gain
step cpu_quant_bench_avx2 60 "$out/cpu.log" env WEFT_QUANTIZED_KERNELS=avx2 "$qb"
# one thread each: where one core, not the memory, sets the pace, the two
# Q4_0 group kernels' own speeds show (the AVX-512 one untimed elsewhere)
for k in avx512 avx2; do
    step cpu_quant_bench_1t 45 "$out/cpu.log" env WEFT_NUM_THREADS=1 WEFT_QUANTIZED_KERNELS=$k "$qb"
done
# twice: the test set's inference takes milliseconds on many cores
for i in 1 2; do
    step cpu_mlp_int8 60 "$out/cpu.log" "$(P weft-train)" --model mlp --device cpu --epochs 1 --quantize \
        --json --data "$data"
done
step cpu_cnn_int8 90 "$out/cpu.log" "$(P weft-train)" --model cnn --device cpu --epochs 1 --quantize --json \
    --data "$data"
step cpu_quant_torch 60 "$out/cpu.log" "$py" bench/quant-torch.py

# ----------------------------------------------------------- benchmark
step bench_weft 60 "$out/bench.jsonl" "$(P bench/cuda-bench)"
step bench_torch 45 "$out/bench.jsonl" "$py" bench/cuda-torch.py

# ------------------------------------------------------------ training
# weft's epochs, then PyTorch's twin on the same card (bench/cuda-train-torch.py)
step train_mlp 45 "$out/train.log" "$(P weft-train)" --model mlp --device cuda --epochs 1 --json --data "$data"
step train_cnn 60 "$out/train.log" "$(P weft-train)" --model cnn --device cuda --epochs 1 --json --data "$data"
step train_torch 60 "$out/train.log" "$py" bench/cuda-train-torch.py --data "$data"

# ------------------------------------------------------- the rest
step conformance 45 "$out/conformance.log" "$(P weft-conformance)" cuda:0
[ -f "$out/conformance.log" ] && grep '^not ok' "$out/conformance.log" | head -20 >>"$out/summary.txt"
step dlpack_torch_cuda 30 "$out/tests.log" "$py" tests/python/test_torch_cuda.py
# weft.distributed on nccl, a world of one (SKIPs where nccl was not built)
step nccl_python 30 "$out/tests.log" "$py" tests/python/test_nccl.py
# the products again through gemm.cu's tiled GEMM, the one the HIP build
# (no hipBLAS) runs: an NVIDIA GPU is where that kernel can be checked
step test_cuda_tiled_gemm 40 "$out/tests.log" env WEFT_CUDA_GEMM=tiled "$(P tests/test_cuda)"
# and the portability header's test program with its kernel run (the first
# architecture of CUDA_ARCHS)
gpu_arch=${CUDA_ARCHS:-90}
gpu_arch=${gpu_arch%% *}
gen_include=
[ -n "$pre" ] && gen_include="-I$pre/gen/include -I$pre/gen"
step gpu_portable 60 "$out/tests.log" env WEFT_NVCC="$nvcc" \
    WEFT_NVCC_FLAGS="-gencode arch=compute_$gpu_arch,code=sm_$gpu_arch $gen_include" sh tests/gpu_portable.sh
grep '^not ok' "$out/tests.log" | sed -n '41,100p' >>"$out/summary.txt"
echo "total $(elapsed)s of ${budget}s" >>"$out/summary.txt"
cat "$out/summary.txt"
