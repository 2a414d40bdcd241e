#!/usr/bin/env python3
"""Trains weft-train's MLP or CNN on Fashion-MNIST, written as a PyTorch user
writes it: the same layers, SGD (lr 0.02, momentum 0.9), batch 64, 2 epochs and
normalisation as weft-train, so it reaches the same accuracy (about 86% and 89%)."""
import argparse
import time

import weft
from weft import nn
from weft.datasets import FashionMNIST
from weft.utils.data import DataLoader, TensorDataset


def make_model(name):
    if name == "mlp":
        return nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 10))
    return nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(32 * 7 * 7, 10))


def make_loader(args, train):
    ds = FashionMNIST(args.data, train=train)
    x = (ds.data.float() / 255 - 0.2860) / 0.3530  # the training set's mean and std
    x = x.view(len(ds), 784) if args.model == "mlp" else x.unsqueeze(1)
    return DataLoader(TensorDataset(x, ds.targets), batch_size=args.batch_size if train else 1000,
                      shuffle=train)


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--model", choices=["mlp", "cnn"], default="mlp")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.02)
    p.add_argument("--limit", type=int, default=0, help="stop each epoch after N batches")
    p.add_argument("--threads", type=int, default=0, help="0: the library's default")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--log-every", type=int, default=100, help="a progress line every N batches")
    p.add_argument("--data", help="the directory of the IDX files (default: Debian's)")
    args = p.parse_args()
    weft.manual_seed(args.seed)
    if args.threads:
        weft.set_num_threads(args.threads)
    train, test = make_loader(args, True), make_loader(args, False)
    model = make_model(args.model)
    optimizer = weft.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    for epoch in range(1, args.epochs + 1):
        model.train()
        start = time.perf_counter()
        for step, (x, y) in enumerate(train, 1):
            optimizer.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            optimizer.step()
            if step % args.log_every == 0 or step in (len(train), args.limit):
                print(f"epoch {epoch}  step {step:5d}/{len(train)}  loss {loss.item():.4f}", flush=True)
            if step == args.limit:
                break
        seconds = time.perf_counter() - start
        model.eval()
        with weft.no_grad():
            correct = sum((model(x).argmax(1) == y).sum().item() for x, y in test)
        print(f"epoch {epoch}  trained in {seconds:.2f} s  "
              f"test accuracy {100 * correct / len(test.dataset):.2f}%", flush=True)


if __name__ == "__main__":
    main()
