#!/bin/sh
# tests/layers.sh — the layer table of docs/design.md, made executable: every
# tracked C/C++/CUDA file may include (with "...") only headers of its own
# directory and of the layers its row allows.  A file that includes a header
# of a layer above its own fails here.  Angle-bracket includes (<weft/...>,
# the public headers, and system headers) are always allowed.  Prints TAP.
srcdir=$(cd "$(dirname "$0")/.." && pwd)
cd "$srcdir" || exit 1
if ! command -v git >/dev/null 2>&1 || ! git rev-parse --git-dir >/dev/null 2>&1; then
    echo "1..0 # SKIP not a git checkout (the file list comes from git ls-files)"
    exit 0
fi

# layer: the directories (first path components) it may include from,
# besides its own.  Bottom up; a layer lists only layers below it.
allowed() {
    case $1 in
    include) echo "" ;;
    c10) echo "" ;;
    dispatch) echo "c10" ;;
    ops) echo "c10 dispatch" ;;     # operator-level code and the core's kernels
    autograd) echo "c10 dispatch" ;;
    interop) echo "c10 dispatch" ;;
    plugins) echo "c10 dispatch" ;;
    profiler) echo "c10 dispatch autograd" ;;
    nn) echo "" ;;                  # the public API only
    distributed) echo "" ;;         # the public API only (issue 18)
    init) echo "c10 dispatch ops autograd interop plugins nn profiler" ;; # the composition root
    backends) echo "" ;;            # plugins: public headers only
    layouts) echo "" ;;             # layout plugins (sparse, quantized): public headers only
    python) echo "" ;;
    tools | bench | examples) echo "" ;;
    tests) echo "backends layouts" ;; # test fixtures may reuse a plugin's header
    *) echo "?" ;;
    esac
}

n=0
fail=0
files=$(git ls-files -- '*.c' '*.h' '*.cc' '*.cu' '*.cuh' | grep -v '^shared/')
bad=$(mktemp)
trap 'rm -f "$bad"' EXIT
for f in $files; do
    layer=${f%%/*}
    [ "$layer" = "$f" ] && continue # a top-level file has no layer
    # the fuzz harnesses are compiled with the core's own sources, as part
    # of it (tests/fuzz.sh): they may read internal headers
    case $f in tests/fuzz/*) continue ;; esac
    ok_dirs=$(allowed "$layer")
    if [ "$ok_dirs" = "?" ]; then
        echo "$f: directory '$layer' is not in the layer table (tests/layers.sh, docs/design.md)" >>"$bad"
        continue
    fi
    grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f" | while IFS= read -r line; do
        inc=$(printf '%s\n' "$line" | sed 's/.*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/')
        case $inc in
        */*) dir=${inc%%/*} ;;
        *) continue ;; # beside the file
        esac
        # a subdirectory of the file's own layer (backends/cuda/plan.h from backends/)
        [ "$dir" = "$layer" ] && continue
        # relative paths within a plugin (../foo.h) stay in the layer
        [ "$dir" = ".." ] && continue
        allowed_here=no
        for a in $ok_dirs; do
            [ "$a" = "$dir" ] && allowed_here=yes
        done
        [ $allowed_here = yes ] && continue
        echo "$f:${line%%:*}: layer '$layer' includes \"$inc\" from '$dir'" >>"$bad"
    done
done
count=$(wc -l <"$bad")
n=$((n + 1))
if [ "$count" -eq 0 ]; then
    echo "ok $n - every include looks down the layer table ($(echo "$files" | wc -w) files)"
else
    echo "not ok $n - $count includes look up the layer table"
    sed 's/^/# /' "$bad"
    fail=1
fi

# and the rule itself must catch a violation: a c10 file including autograd
n=$((n + 1))
probe=$(mktemp -d)
mkdir -p "$probe/c10"
printf '#include "autograd/autograd.h"\n' >"$probe/c10/probe.c"
caught=no
inc=$(sed 's/.*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/' "$probe/c10/probe.c")
dir=${inc%%/*}
case " $(allowed c10) " in *" $dir "*) ;; *) caught=yes ;; esac
rm -rf "$probe"
if [ $caught = yes ]; then
    echo "ok $n - the table refuses c10 including autograd"
else
    echo "not ok $n - the table lets c10 include autograd"
    fail=1
fi
echo "1..$n"
exit $fail
