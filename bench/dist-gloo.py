# bench/dist-gloo.py — the reference side of bench/dist-compare: the same
# float32 all_reduce (sum) rows as bench/dist_bench.c, on torch 1.13's gloo
# backend, under the same mpirun -np 2 (rank and size from Open MPI's
# environment, rendezvous over TCP on this machine).
import os
import time

import torch
import torch.distributed as dist

rank = int(os.environ["OMPI_COMM_WORLD_RANK"])
size = int(os.environ["OMPI_COMM_WORLD_SIZE"])
os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
os.environ.setdefault("MASTER_PORT", os.environ.get("WEFT_GLOO_PORT", "29533"))
torch.set_num_threads(1)
dist.init_process_group("gloo", rank=rank, world_size=size)

ROWS = [("all_reduce_4KB", 4096, 2000), ("all_reduce_1MB", 1 << 20, 200),
        ("all_reduce_64MB", 64 << 20, 8)]
for name, nbytes, iters in ROWS:
    t = torch.ones(nbytes // 4, dtype=torch.float32)
    for _ in range(iters // 4 + 1):
        dist.all_reduce(t)
    per = []
    for _ in range(5):
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(iters):
            dist.all_reduce(t)
        per.append((time.perf_counter() - t0) / iters)
    per.sort()
    if rank == 0:
        print("%s %.1f us" % (name, per[2] * 1e6), flush=True)
dist.barrier()
dist.destroy_process_group()
