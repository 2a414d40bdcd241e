"""bench/python-train.py — the Python example's epoch time, weft against
PyTorch 1.13 (issue 15): runs examples/python/fashion_mnist.py unchanged
twice per round, once on weft and once on torch (the same file, with
`import weft` answered by a thin module that forwards to torch: weft.nn is
torch.nn, weft.optim torch.optim, weft.utils.data torch.utils.data, and
weft.datasets.FashionMNIST the same IDX files decoded with gzip and NumPy
into torch tensors).  Same data, model, batch size, thread count and
number of batches; the two alternate, each in a fresh process, and each
column keeps its best round, so a busy machine slows both alike.  The time
is the training loop of epoch 1 as the script prints it ("trained in X s":
the DataLoader's batches, forward, backward, optimizer step; not the data
loading nor the test pass).  Needs Debian's python3-torch and
dataset-fashion-mnist; from a build tree:

    PYTHONPATH=python/pkg WEFT_PLUGIN_PATH=$PWD/.libs /usr/bin/python3 bench/python-train.py \
        --model mlp --threads 2 --rounds 3 [--limit N]

libgomp's spinning workers are told to sleep (OMP_WAIT_POLICY=PASSIVE,
unless set) for both, as bench/train-compare does for libtorch.
"""
import argparse
import os
import re
import subprocess
import sys
import types

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.join(HERE, "..", "examples", "python", "fashion_mnist.py")


def torch_as_weft():
    """Installs modules named weft, weft.nn, weft.optim, weft.utils,
    weft.utils.data and weft.datasets that are torch's, so the example runs
    on torch without an edit."""
    import gzip

    import numpy as np
    import torch
    import torch.utils.data

    def read_idx(path):
        with gzip.open(path, "rb") as f:
            blob = f.read()
        ndim = blob[3]
        sizes = [int.from_bytes(blob[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
        arr = np.frombuffer(blob, np.uint8, offset=4 + 4 * ndim).reshape(sizes)
        return torch.from_numpy(arr.copy())

    class FashionMNIST(torch.utils.data.Dataset):
        def __init__(self, root=None, train=True):
            root = root or "/usr/share/datasets/fashion-mnist"
            prefix = "train" if train else "t10k"
            self.data = read_idx(os.path.join(root, prefix + "-images-idx3-ubyte.gz"))
            self.targets = read_idx(os.path.join(root, prefix + "-labels-idx1-ubyte.gz")).long()

        def __len__(self):
            return len(self.data)

    datasets = types.ModuleType("weft.datasets")
    datasets.FashionMNIST = FashionMNIST
    shim = types.ModuleType("weft")
    shim.__getattr__ = lambda name: getattr(torch, name)
    shim.datasets = datasets
    shim.nn, shim.optim, shim.utils = torch.nn, torch.optim, torch.utils
    sys.modules.update({"weft": shim, "weft.nn": torch.nn, "weft.optim": torch.optim,
                        "weft.utils": torch.utils, "weft.utils.data": torch.utils.data,
                        "weft.datasets": datasets})


def run(framework, args):
    cmd = [sys.executable, os.path.abspath(__file__), "--child", framework, "--",
           "--model", args.model, "--epochs", "1", "--threads", str(args.threads),
           "--log-every", "1000000"]
    if args.limit:
        cmd += ["--limit", str(args.limit)]
    env = dict(os.environ)
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    out = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         universal_newlines=True)
    m = re.search(r"trained in ([0-9.]+) s\s+test accuracy ([0-9.]+)%", out.stdout)
    if out.returncode != 0 or not m:
        sys.exit("bench/python-train.py: the %s run failed:\n%s%s"
                 % (framework, out.stdout, out.stderr))
    return float(m.group(1)), float(m.group(2))


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        framework, rest = sys.argv[2], sys.argv[4:]
        if framework == "torch":
            torch_as_weft()
        sys.argv = [EXAMPLE] + rest
        import runpy
        runpy.run_path(EXAMPLE, run_name="__main__")
        return
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", choices=["mlp", "cnn"], default="mlp")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--limit", type=int, default=0, help="batches per epoch (0: all 938)")
    args = p.parse_args()
    best = {"weft": None, "torch": None}
    for r in range(args.rounds):
        for fw in ("weft", "torch"):
            seconds, acc = run(fw, args)
            print("round %d  %-5s  %s  epoch 1: %.2f s  test accuracy %.2f%%"
                  % (r + 1, fw, args.model, seconds, acc), flush=True)
            if best[fw] is None or seconds < best[fw][0]:
                best[fw] = (seconds, acc)
    w, t = best["weft"], best["torch"]
    print("%s, %d threads, %s batches, best of %d: weft %.2f s, torch %.2f s, weft / torch "
          "%.2fx (goal <= 0.7x: %s); accuracy %.2f%% / %.2f%%"
          % (args.model, args.threads, args.limit or "all", args.rounds, w[0], t[0],
             w[0] / t[0], "met" if w[0] / t[0] <= 0.7 else "missed", w[1], t[1]))


if __name__ == "__main__":
    main()
