#!/usr/bin/env python3
"""Trains ResNet-50 (batch 64, SGD, random data) on the GPU with memkit as PyTorch's
allocator (memkit.torch.enable()), or with PyTorch's own for comparison, and prints the
median step time, the peaks and memkit's memory_summary().

    python3 train_resnet50.py [--allocator memkit|pytorch] [--steps 25] [--warmup 10]
                              [--json OUT.json]

Run with MEMKIT_RECORD=PATH to record memkit's calls to a trace for `memkit replay`.
"""
import argparse
import json
import statistics
import time

import torch
import torchvision


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--allocator", choices=["memkit", "pytorch"], default="memkit")
    parser.add_argument("--steps", type=int, default=25)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args()
    if args.allocator == "memkit":
        import memkit.torch as memory
        memory.enable()
    else:
        memory = torch.cuda

    torch.manual_seed(0)
    model = torchvision.models.resnet50().cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    images = torch.randn(64, 3, 224, 224, device="cuda")
    labels = torch.randint(0, 1000, (64,), device="cuda")
    times, losses = [], []
    for step in range(args.warmup + args.steps):
        torch.cuda.synchronize()
        start = time.perf_counter()
        loss = torch.nn.functional.cross_entropy(model(images), labels)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        if step >= args.warmup:
            times.append(time.perf_counter() - start)
        losses.append(loss.item())
    figures = {
        "allocator": args.allocator,
        "median_step_ms": 1e3 * statistics.median(times),
        "max_memory_allocated": memory.max_memory_allocated(),
        "max_memory_reserved": memory.max_memory_reserved(),
        "last_loss": losses[-1],
    }
    print(json.dumps(figures))
    print(memory.memory_summary())
    if args.json:
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=1)


if __name__ == "__main__":
    main()
