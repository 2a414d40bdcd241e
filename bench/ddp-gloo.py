# bench/ddp-gloo.py — the reference side of bench/ddp-compare: one epoch of
# weft-train's MLP (784-256-10, ReLU) on Fashion-MNIST with torch 1.13's
# DistributedDataParallel on gloo, under the same mpirun -np 2 as weft:
# global batch 64 (each rank its half), SGD lr 0.02 momentum 0.9, one
# intra-op thread per rank.  Rank 0 prints the training loop's seconds and
# the test accuracy.
import gzip
import os
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn

rank = int(os.environ["OMPI_COMM_WORLD_RANK"])
size = int(os.environ["OMPI_COMM_WORLD_SIZE"])
os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
os.environ.setdefault("MASTER_PORT", os.environ.get("WEFT_GLOO_PORT", "29633"))
torch.set_num_threads(1)
dist.init_process_group("gloo", rank=rank, world_size=size)
data = sys.argv[1] if len(sys.argv) > 1 else "/usr/share/datasets/fashion-mnist"


def idx(name, offset):
    with gzip.open(os.path.join(data, name)) as f:
        return np.frombuffer(f.read(), dtype=np.uint8, offset=offset)


def images(prefix):
    x = idx(prefix + "-images-idx3-ubyte.gz", 16).reshape(-1, 784).astype(np.float32)
    return torch.from_numpy((x / 255.0 - 0.2860) / 0.3530)


xtr, ytr = images("train"), torch.from_numpy(idx("train-labels-idx1-ubyte.gz", 8).astype(np.int64))
xte, yte = images("t10k"), torch.from_numpy(idx("t10k-labels-idx1-ubyte.gz", 8).astype(np.int64))
torch.manual_seed(7)
model = nn.parallel.DistributedDataParallel(nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 10)))
opt = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9)
loss_fn = nn.CrossEntropyLoss()
g = torch.Generator().manual_seed(7)
order = torch.randperm(xtr.shape[0], generator=g)
batch = 64
dist.barrier()
t0 = time.perf_counter()
for start in range(0, xtr.shape[0], batch):
    idxs = order[start:start + batch]
    b = idxs.shape[0]
    mine = idxs[b * rank // size:b * (rank + 1) // size]
    opt.zero_grad()
    loss = loss_fn(model(xtr[mine]), ytr[mine])
    loss.backward()
    opt.step()
seconds = time.perf_counter() - t0
with torch.no_grad():
    acc = (model(xte).argmax(1) == yte).float().mean().item() * 100
if rank == 0:
    print("train_seconds %.3f test_accuracy %.2f" % (seconds, acc), flush=True)
dist.destroy_process_group()
