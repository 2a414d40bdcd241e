"""bench/conv-torch.py — libtorch's side of bench/conv-compare: the same
cases as bench/conv-bench.c (conv2d, its input and weight gradients on the
training CNN's two layers, batch 64 and 32), through torch's CPU
convolution (oneDNN-backed in torch 1.13), the same output lines:
  <layer> <pass> <batch> <best cpu us per call> <best wall us per call>
Python's call overhead (a few us) is inside torch's times.

  /usr/bin/python3 bench/conv-torch.py THREADS ROUNDS"""
import sys
import time

import torch


def main():
    threads = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    torch.set_num_threads(threads)
    torch.set_grad_enabled(False)
    for name, c, oc, hw in (("conv1", 1, 16, 28), ("conv2", 16, 32, 14)):
        for n in (64, 32):
            x = torch.rand(n, c, hw, hw) * 2 - 1
            w = torch.rand(oc, c, 3, 3) * 2 - 1
            b = torch.rand(oc) * 2 - 1
            go = torch.rand(n, oc, hw, hw) * 2 - 1
            passes = {
                "fwd": lambda: torch.nn.functional.conv2d(x, w, b, 1, 1),
                "bwd_input": lambda: torch.ops.aten.convolution_backward(
                    go, x, w, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1,
                    [True, False, False]),
                "bwd_weight": lambda: torch.ops.aten.convolution_backward(
                    go, x, w, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1,
                    [False, True, False]),
            }
            flop = 2.0 * n * oc * hw * hw * c * 9
            reps = int(20e-3 * 20e9 / flop) + 1
            for pname, fn in passes.items():
                fn()
                best_cpu = best_wall = 1e9
                for _ in range(rounds):
                    c0, w0 = time.process_time(), time.perf_counter()
                    for _ in range(reps):
                        fn()
                    best_cpu = min(best_cpu, (time.process_time() - c0) / reps)
                    best_wall = min(best_wall, (time.perf_counter() - w0) / reps)
                print(f"{name} {pname} {n} {best_cpu * 1e6:.1f} {best_wall * 1e6:.1f}",
                      flush=True)


main()
