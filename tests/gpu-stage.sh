#!/bin/sh
# tests/gpu-stage.sh — packs what a GPU session needs from this build tree
# into one file, for a lent GPU machine whose image is not the project's
# (issue 23).  That machine (this workplace's CUDA image) has nvcc, the
# CUDA libraries and PyTorch with CUDA, but no Autotools, no OpenBLAS and
# no FashionMNIST, and reaches nothing outside: rather than configure
# there, the programs built here travel with the libraries they need that
# such an image lacks.  Binaries built on Debian 12 (glibc 2.36) run on any
# newer glibc.
#
#   sh tests/gpu-stage.sh [FILE]     (default gpu-stage.tar.xz, ignored)
#
# The archive holds:
#   bin/      the real programs behind libtool's wrappers: the CUDA TAP
#             programs, weft-info, weft-train, weft-conformance, cuda-bench
#   lib/      libweft.so.1 and the plugins (cpu and its variants, cuda,
#             sparse, sparse_cuda, quantized),
#             test_sparse_cuda, and the
#             nccl collective backend when built (test_nccl in bin/)
#   deps/     OpenBLAS, libgfortran, libquadmath (what the CPU plugin links),
#             oneDNN with libgomp and libOpenCL (what the quantized plugin
#             links and the CPU plugin opens for its convolutions)
#   cpu/      the CPU TAP programs (every tests/test_* that links neither
#             libtorch nor a GPU runtime) and quant-bench: a GPU machine's
#             host CPU is the one place this workplace reaches whose CPU
#             may have AVX-512, which only there runs natively
#   testplugins/  the test plugins those programs load (tests/plugins/)
#   deps-cuda/ libcudart.so.13, used only when the machine has none
#   data/     Debian's FashionMNIST IDX files, for weft-train
#   gen/      config.h and the generated headers, for the Python extension
# tests/gpu-session.sh --prebuilt DIR runs from such an unpacked archive.
# xz because the limit on what travels is counted in bytes sent.
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
cd "$src"
dest=${1:-gpu-stage.tar.xz}
case $dest in /*) ;; *) dest="$src/$dest" ;; esac
grep -q 'S\["HAVE_CUDA_TRUE"\]=""' config.status 2>/dev/null || {
    echo "gpu-stage: this tree is not configured with the CUDA plugin (./configure --with-cuda)" >&2
    exit 1
}
make -j"$(nproc)" >/dev/null
if grep -q 'S\["HAVE_NCCL_TRUE"\]=""' config.status; then
    make -j"$(nproc)" tests/test_nccl >/dev/null
fi
make -j"$(nproc)" tests/test_sparse_cuda >/dev/null
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/bin" "$tmp/lib" "$tmp/deps" "$tmp/deps-cuda" "$tmp/data"
for p in tests/.libs/test_cuda tests/.libs/test_cuda_nn tests/.libs/test_cuda_index \
    .libs/weft-info .libs/weft-train .libs/weft-conformance bench/.libs/cuda-bench; do
    [ -x "$p" ] || { echo "gpu-stage: $p is not built" >&2; exit 1; }
    cp "$p" "$tmp/bin/"
done
cp .libs/libweft.so.1 "$tmp/lib/"
# the nccl collective backend and its test, where configure found NCCL;
# libnccl.so.2 itself (200 MB) does not travel: gpu-session.sh finds the
# machine's (the toolkit's, or the wheel beside its PyTorch)
if [ -x tests/.libs/test_nccl ] && [ -f .libs/libweftdist-nccl.so ]; then
    cp tests/.libs/test_nccl "$tmp/bin/"
    cp .libs/libweftdist-nccl.so "$tmp/lib/"
fi
for p in cpu cpu-avx2 cpu-avx512 cuda sparse sparse_cuda quantized; do
    cp ".libs/libweft-$p.so" "$tmp/lib/"
done
# the CPU's test programs and the plugins they load
mkdir -p "$tmp/cpu" "$tmp/testplugins"
make -j"$(nproc)" tap-programs bench/quant-bench >/dev/null
for p in $(sh tests/cpu-tap-all.sh --list); do
    cp "tests/.libs/${p##*/}" "$tmp/cpu/"
done
cp bench/.libs/quant-bench "$tmp/cpu/"
cp -L tests/plugins/.libs/*.so "$tmp/testplugins/"
# the sparse layouts on CUDA (cuSPARSE: the machine's own, like NCCL)
cp tests/.libs/test_sparse_cuda "$tmp/bin/"
# a library by its soname, from where this machine's loader finds it
dep() {
    f=$(ldd .libs/libweft-cpu.so .libs/libweft-cuda.so .libs/libweft-quantized.so | awk -v n="$1" '$1 == n { print $3; exit }')
    [ -n "$f" ] || { echo "gpu-stage: no $1 here" >&2; exit 1; }
    cp "$(readlink -f "$f")" "$tmp/$2/$1"
}
dep libopenblas.so.0 deps
dep libgfortran.so.5 deps
dep libquadmath.so.0 deps
dep libdnnl.so.2 deps
dep libgomp.so.1 deps
dep libOpenCL.so.1 deps
dep libcudart.so.13 deps-cuda
cp /usr/share/datasets/fashion-mnist/*.gz "$tmp/data/"
# what the Python extension's compilation there needs beside the sources
for f in config.h include/weft/ops.h dispatch/ops_gen.h layouts/quantized/schemas.h \
    layouts/sparse/schemas.h; do
    mkdir -p "$tmp/gen/$(dirname "$f")"
    cp "$f" "$tmp/gen/$f"
done
# DLPack's header, from Debian's libdlpack-dev (include/weft/dlpack_compat.h)
mkdir -p "$tmp/gen/include/dlpack"
cp /usr/include/dlpack/dlpack.h "$tmp/gen/include/dlpack/"
# WEFT_GPU_STAGE_ASAN=DIR: also the AddressSanitizer build of a tree
# configured there with --enable-sanitizers --with-cuda (its test_cuda,
# core and plugins, and the sanitizer runtimes), for a crash that only a
# GPU shows
if [ -n "${WEFT_GPU_STAGE_ASAN:-}" ]; then
    a=$WEFT_GPU_STAGE_ASAN
    mkdir -p "$tmp/asan/bin" "$tmp/asan/lib" "$tmp/asan/deps"
    cp "$a/tests/.libs/test_cuda" "$tmp/asan/bin/"
    cp "$a/.libs/libweft.so.1" "$a/.libs/libweft-cpu.so" "$a/.libs/libweft-cuda.so" "$tmp/asan/lib/"
    for so in libasan.so.8 libubsan.so.1; do
        cp "$(readlink -f "$(ldd "$a/tests/.libs/test_cuda" | awk -v n=$so '$1 == n { print $3 }')")" \
            "$tmp/asan/deps/$so"
    done
fi
tar -C "$tmp" -cJf "$dest" .
echo "gpu-stage: $dest, $(du -k "$dest" | cut -f1) KiB"
