#!/usr/bin/env python3
"""bench/cuda-torch.py — PyTorch's side of the CUDA benchmark: the rows of
bench/cuda-bench.c (same shapes, same timing: CUDA events around N
iterations after warm-up, best of 5), one JSON object per row.  When torch
or torch.cuda is not available it prints why and exits 0, and the weft rows
stand alone against the goals they carry."""
import json
import sys


def main():
    try:
        import torch
    except ImportError as e:
        print(json.dumps({"skipped": "torch is not importable: %s" % e}))
        return 0
    if not torch.cuda.is_available():
        print(json.dumps({"skipped": "torch.cuda is not available (a CPU-only build of torch, or no GPU)"}))
        return 0
    torch.backends.cuda.matmul.allow_tf32 = False  # as weft's default
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device("cuda:0")

    def time_ms(fn, iters):
        for _ in range(3):
            fn()
        best = float("inf")
        for _ in range(5):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            for _ in range(iters):
                fn()
            b.record()
            b.synchronize()
            best = min(best, a.elapsed_time(b) / iters)
        return best

    only = sys.argv[1] if len(sys.argv) > 1 else None
    print(json.dumps({"device": torch.cuda.get_device_name(0), "torch": torch.__version__}))
    if only in (None, "add"):
        n = 256 << 20
        a, b, c = (torch.randn(n, device=dev) for _ in range(3))
        add = time_ms(lambda: torch.add(a, b, out=c), 10)
        cp = time_ms(lambda: c.copy_(a), 10)
        print(json.dumps({"row": "add_256M_f32", "torch_ms": round(add, 4),
                          "torch_GB_per_s": round(3 * n * 4 / add / 1e6, 1),
                          "torch_copy_GB_per_s": round(2 * n * 4 / cp / 1e6, 1)}))
    if only in (None, "gemm"):
        for name, dtype, n in (("sgemm_f32_tf32_off", torch.float32, 4096),
                               ("gemm_bf16", torch.bfloat16, 8192)):
            a, b = torch.randn(n, n, device=dev, dtype=dtype), torch.randn(n, n, device=dev, dtype=dtype)
            c = torch.empty(n, n, device=dev, dtype=dtype)
            ms = time_ms(lambda: torch.mm(a, b, out=c), 10)
            print(json.dumps({"row": name, "torch_ms": round(ms, 4),
                              "torch_TFLOP_per_s": round(2 * n ** 3 / ms / 1e9, 1)}))
    if only in (None, "conv"):
        x = torch.randn(64, 64, 56, 56, device=dev)
        w = torch.randn(64, 64, 3, 3, device=dev)
        bias = torch.randn(64, device=dev)
        ms = time_ms(lambda: torch.nn.functional.conv2d(x, w, bias, 1, 1), 10)
        print(json.dumps({"row": "conv2d_64x64x56x56_k3", "torch_ms": round(ms, 4)}))
        ms = time_ms(lambda: torch.nn.functional.conv2d(x, w, None, 1, 1), 10)
        print(json.dumps({"row": "conv2d_64x64x56x56_k3_nobias", "torch_ms": round(ms, 4)}))
        b4 = bias.view(1, 64, 1, 1)
        ms = time_ms(lambda: x.add_(b4), 10)
        print(json.dumps({"row": "add_bias_1x64x1x1_into_64x64x56x56", "torch_ms": round(ms, 4),
                          "torch_GB_per_s": round(2 * x.numel() * 4 / ms / 1e6, 1)}))
    if only in (None, "train"):
        nn = torch.nn
        for name, model, shape in (
                ("mlp", nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 10)), (64, 784)),
                ("cnn", nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                                      nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                                      nn.Flatten(), nn.Linear(32 * 7 * 7, 10)), (64, 1, 28, 28))):
            model = model.to(dev)
            opt = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9)
            x = torch.randn(*shape, device=dev)
            y = torch.randint(0, 10, (64,), device=dev)

            def step():
                loss = nn.functional.cross_entropy(model(x), y)
                loss.backward()
                opt.step()
                opt.zero_grad()
            ms = time_ms(step, 50)
            print(json.dumps({"row": "%s_train_step_b64" % name, "torch_ms": round(ms, 4)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
