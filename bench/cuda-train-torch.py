#!/usr/bin/env python3
"""bench/cuda-train-torch.py — PyTorch's twin of `weft-train --device cuda`
(issue 23): the same models (MLP 784-256-10; CNN conv16-relu-pool,
conv32-relu-pool, linear), the same data handling (the IDX files, pixels
normalised with the training set's mean and deviation on the host, each
batch assembled on the host and copied to the GPU), batch 64, SGD with
momentum 0.9 at lr 0.02, the loss read back every step as weft-train does.
Prints one JSON object per model with train_seconds for one epoch and the
test accuracy, so the two can be compared on the same card in one call.

    python3 bench/cuda-train-torch.py [--data DIR] [--models mlp,cnn]
"""
import argparse
import gzip
import json
import os
import time


def read_idx(path):
    import numpy as np
    with gzip.open(path, "rb") as f:
        raw = f.read()
    ndim = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--models", default="mlp,cnn")
    p.add_argument("--epochs", type=int, default=1)
    args = p.parse_args()
    try:
        import torch
    except ImportError as e:
        print(json.dumps({"skipped": "torch is not importable: %s" % e}))
        return 0
    if not torch.cuda.is_available():
        print(json.dumps({"skipped": "torch.cuda is not available"}))
        return 0
    torch.backends.cuda.matmul.allow_tf32 = False  # as weft's default
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device("cuda:0")
    nn = torch.nn

    def load(kind):
        x = read_idx(os.path.join(args.data, "%s-images-idx3-ubyte.gz" % kind))
        y = read_idx(os.path.join(args.data, "%s-labels-idx1-ubyte.gz" % kind))
        x = (torch.from_numpy(x.copy()).float().reshape(len(x), 784) / 255.0 - 0.2860) / 0.3530
        return x, torch.from_numpy(y.astype("int64"))

    xtr, ytr = load("train")
    xte, yte = load("t10k")
    for model in args.models.split(","):
        torch.manual_seed(0)
        if model == "cnn":
            m = nn.Sequential(nn.Unflatten(1, (1, 28, 28)),
                              nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                              nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                              nn.Flatten(), nn.Linear(32 * 7 * 7, 10))
        else:
            m = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 10))
        m = m.to(dev)
        opt = torch.optim.SGD(m.parameters(), lr=0.02, momentum=0.9)
        lossf = nn.CrossEntropyLoss()
        # a warm-up step, as weft's first step also pays its set-up
        # (cuBLAS handles, cuDNN plans) inside the timed epoch: none here
        # would favour weft, so the first step is not excluded for either
        g = torch.Generator().manual_seed(0)
        train_seconds = 0.0
        for _ in range(args.epochs):
            order = torch.randperm(len(xtr), generator=g)
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for s in range(0, len(xtr), 64):
                idx = order[s:s + 64]
                x = xtr[idx].to(dev)
                y = ytr[idx].to(dev)
                loss = lossf(m(x), y)
                loss.backward()
                opt.step()
                opt.zero_grad(set_to_none=False)
                last = loss.item()
            torch.cuda.synchronize()
            train_seconds += time.perf_counter() - t0
        with torch.no_grad():
            correct = 0
            for s in range(0, len(xte), 1000):
                correct += (m(xte[s:s + 1000].to(dev)).argmax(1).cpu() == yte[s:s + 1000]).sum().item()
        print(json.dumps({"framework": "torch " + torch.__version__, "model": model,
                          "device": torch.cuda.get_device_name(0), "epochs": args.epochs,
                          "train_seconds": round(train_seconds, 3), "last_loss": round(last, 4),
                          "test_accuracy": round(100.0 * correct / len(xte), 2)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
