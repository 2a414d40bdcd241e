#!/bin/sh
# tests/python.sh — runs tests/python/*.py against the module in
# python/pkg (the package, linked there by make) and prints one TAP stream (the .py files print unnumbered
# "ok - ..." lines; this script numbers them and writes the plan).
#  - test_api.py with the Python the build was configured for;
#  - test_numpy.py, test_torch.py and test_indexing.py (which compares
#    with PyTorch too where it is installed) with Debian's /usr/bin/python3
#    (python3-numpy 1.24, python3-torch 1.13) when it has the same ABI;
#  - test_nn.py, test_optim.py and test_data.py (weft.nn, weft.optim,
#    weft.utils.data against torch 1.13) with Debian's python3 when it has
#    torch, else with the configured Python (their torch parts SKIP);
#  - test_numpy2.py in a virtual environment under the build directory with
#    NumPy >= 2.1 from PyPI, made once and kept (SKIP where pip fails).
builddir=$(cd "${WEFT_BUILDDIR:-.}" && pwd)
srcdir=$(cd "$(dirname "$0")/.." && pwd)
python=${WEFT_PYTHON:-python3}
moddir="$builddir/python/pkg"
if [ ! -f "$moddir/weft/_C.so" ]; then
    echo "1..0 # SKIP the Python module was not built (configure found no Python headers)"
    exit 0
fi
PYTHONPATH="$moddir:$srcdir/tests/python"
WEFT_PLUGIN_PATH=${WEFT_PLUGIN_PATH:-$builddir/.libs}
# no __pycache__ in the source tree
PYTHONDONTWRITEBYTECODE=1
export PYTHONPATH WEFT_PLUGIN_PATH PYTHONDONTWRITEBYTECODE
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
soabi() { "$1" -c 'import sysconfig; print(sysconfig.get_config_var("SOABI"))' 2>/dev/null; }

run() { # run DESCRIPTION PYTHON SCRIPT [ARG...]: the script's lines, or one failure
    desc=$1 py=$2 script=$3
    shift 3
    if ! "$py" "$srcdir/tests/python/$script" "$@" >"$tmp/out" 2>"$tmp/err"; then
        grep -q '^not ok' "$tmp/out" || echo "not ok - $desc: $script exited with an error" >>"$tmp/out"
    fi
    sed 's/^# \(.*\)/#   \1/' "$tmp/out" >>"$tmp/all"
    sed 's/^/# stderr: /' "$tmp/err" | tail -20 >>"$tmp/all"
}
skip() { echo "ok - $1 # SKIP $2" >>"$tmp/all"; }
: >"$tmp/all"

run "API" "$python" test_api.py
# the package's Python layer; compares with torch where this Python has it
run "package" "$python" test_package.py
run "type stubs" "$python" test_stubs.py
run "layouts" "$python" test_layouts.py

debian=/usr/bin/python3
if [ ! -x "$debian" ]; then
    skip "NumPy 1.24 and PyTorch 1.13 peers" "$debian not found"
elif [ "$(soabi "$debian")" != "$(soabi "$python")" ]; then
    skip "NumPy 1.24 and PyTorch 1.13 peers" "$debian is $(soabi "$debian"), the module was built for $(soabi "$python")"
else
    if "$debian" -c 'import numpy' 2>/dev/null; then
        run "NumPy (Debian)" "$debian" test_numpy.py
    else
        skip "NumPy (Debian) peer" "numpy is not installed for $debian (apt-get install python3-numpy)"
    fi
    if "$debian" -c 'import numpy' 2>/dev/null; then
        run "indexing, unique, interpolate (NumPy, PyTorch)" "$debian" test_indexing.py
    else
        skip "indexing against NumPy" "numpy is not installed for $debian (apt-get install python3-numpy)"
    fi
    if "$debian" -c 'import torch' 2>/dev/null; then
        run "PyTorch (Debian)" "$debian" test_torch.py
        # quantized tensors against torch (issue 17)
        run "quantized (PyTorch)" "$debian" test_quantized.py
        # kDLCUDA with torch on the GPU (issue 6): SKIPs where torch.cuda is missing
        run "PyTorch CUDA (Debian)" "$debian" test_torch_cuda.py
        # the sparse layouts against torch.sparse (issue 16)
        run "sparse layouts (PyTorch)" "$debian" test_sparse.py
        # torch's functions that are compositions of weft's (python/weft/_compose.py)
        run "compositions (PyTorch)" "$debian" test_compose.py
    else
        skip "PyTorch (Debian) peer" "torch is not installed for $debian (apt-get install python3-torch)"
    fi
fi

# weft.nn, weft.optim, weft.utils.data (issue 15): with Debian's python3 when
# it has torch 1.13 and the module's ABI, so they compare with torch;
# otherwise with the configured Python, where the comparisons say SKIP.
peer=$python
if [ -x "$debian" ] && [ "$(soabi "$debian")" = "$(soabi "$python")" ] &&
    "$debian" -c 'import torch' 2>/dev/null; then
    peer=$debian
fi
run "nn (PyTorch peer)" "$peer" test_nn.py
run "optim (PyTorch peer)" "$peer" test_optim.py
run "utils.data" "$peer" test_data.py
# the profiler (issue 19): its table beside torch.profiler's where the peer has torch
run "profiler" "$peer" test_profiler.py
# the nccl collective backend in a world of one; SKIPs without a GPU or NCCL
run "distributed on nccl" "$python" test_nccl.py
# weft.datasets.FashionMNIST against the raw files (issue 15)
run "datasets" "$python" test_datasets.py
# weft.save/weft.load of an optimizer's state_dict (issue 15)
run "save/load of nested objects" "$python" test_save_nested.py

# NumPy >= 2.1 from PyPI, in a venv kept in the build directory
venv="$builddir/tests/python-venv"
if [ ! -x "$debian" ] || [ "$(soabi "$debian")" != "$(soabi "$python")" ]; then
    skip "NumPy >= 2.1 peer" "no Python with the module's ABI to make a virtual environment from"
else
    if [ ! -f "$venv/.ready" ]; then
        rm -rf "$venv"
        if "$debian" -m venv "$venv" >"$tmp/venv.log" 2>&1 &&
            "$venv/bin/python" -m pip install --quiet --timeout 20 --retries 1 'numpy>=2.1' \
                >>"$tmp/venv.log" 2>&1; then
            touch "$venv/.ready"
        fi
    fi
    if [ -f "$venv/.ready" ]; then
        run "NumPy >= 2.1 (PyPI)" "$venv/bin/python" test_numpy2.py
    else
        skip "NumPy >= 2.1 peer" "could not make a virtual environment with numpy>=2.1 from PyPI (no network?): $(tail -1 "$tmp/venv.log")"
    fi
fi

# safetensors from PyPI, with Debian's torch visible: a venv kept in the
# build directory (as the NumPy 2 one), SKIP where pip cannot reach PyPI
stvenv="$builddir/tests/python-venv-safetensors"
if [ ! -x "$debian" ] || [ "$(soabi "$debian")" != "$(soabi "$python")" ] ||
    ! "$debian" -c 'import torch' 2>/dev/null; then
    skip "safetensors (PyPI) and torch peers" "no $debian with torch and the module's ABI (apt-get install python3-torch)"
else
    if [ ! -f "$stvenv/.ready" ]; then
        rm -rf "$stvenv"
        if "$debian" -m venv --system-site-packages "$stvenv" >"$tmp/stvenv.log" 2>&1 &&
            "$stvenv/bin/python" -m pip install --quiet --timeout 20 --retries 1 safetensors \
                >>"$tmp/stvenv.log" 2>&1; then
            touch "$stvenv/.ready"
        fi
    fi
    if [ -f "$stvenv/.ready" ]; then
        run "safetensors (PyPI) with torch" "$stvenv/bin/python" test_safetensors.py
    else
        skip "safetensors (PyPI) and torch peers" "could not install safetensors from PyPI into a venv (no network?): $(tail -1 "$tmp/stvenv.log")"
    fi
fi

# pip install . into a fresh virtual environment (issue 15): from a copy of
# the files setup.py reads, so the build leaves nothing in the source tree;
# libweft and the plugins are this build's (WEFT_BUILDDIR).  An isolated
# build fetches setuptools and wheel from PyPI; offline, the environment
# sees Debian's (--system-site-packages, --no-build-isolation), and the
# NumPy-less check then says SKIP where Debian's numpy is visible.
pipenv="$tmp/pip-venv"
pipsrc="$tmp/pip-src"
mkdir -p "$pipsrc/tools" "$pipsrc/dispatch"
cp "$srcdir/dispatch/operators.def" "$srcdir/dispatch/gen_ops.py" "$pipsrc/dispatch/" &&
cp -R "$srcdir/setup.py" "$srcdir/pyproject.toml" "$srcdir/README.md" "$srcdir/configure.ac" \
    "$srcdir/python" "$srcdir/include" "$pipsrc/" &&
    cp "$srcdir"/tools/info_report.* "$pipsrc/tools/" &&
    find "$pipsrc/python" -name __pycache__ -prune -exec rm -rf {} + 2>/dev/null
pip_install() { # pip_install VENV-FLAGS PIP-FLAGS
    rm -rf "$pipenv"
    "$python" -m venv $1 "$pipenv" >>"$tmp/pip.log" 2>&1 &&
        (cd "$pipsrc" && WEFT_BUILDDIR="$builddir" "$pipenv/bin/python" -m pip install --quiet \
            --timeout 20 --retries 1 $2 . >>"$tmp/pip.log" 2>&1)
}
# the build's plugins, which the package bundles: plugins may define
# operators (the sparse and quantized layouts' do), so both count the same table
WEFT_PLUGIN_PATH="$builddir/.libs" "$builddir/weft-info" >"$tmp/weft-info.txt" 2>/dev/null
if ! "$python" -m venv --help >/dev/null 2>&1; then
    skip "pip install . in a fresh virtual environment" "$python has no venv module (apt-get install python3-venv)"
elif pip_install "" "" || pip_install --system-site-packages "--no-build-isolation --no-index"; then
    (unset WEFT_PLUGIN_PATH; PYTHONPATH="$srcdir/tests/python"; cd "$tmp" &&
        run "pip install ." "$pipenv/bin/python" test_installed.py "$tmp/weft-info.txt")
else
    echo "not ok - pip install . in a fresh virtual environment failed: $(tail -3 "$tmp/pip.log" | tr '\n' ' ')" >>"$tmp/all"
fi

awk '/^(not )?ok /{n++; sub(/^ok -/, "ok " n " -"); sub(/^not ok -/, "not ok " n " -")} {print} END {print "1.." n}' "$tmp/all"
! grep -q '^not ok' "$tmp/all"
