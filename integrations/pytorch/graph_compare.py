#!/usr/bin/env python3
"""A training step captured whole as a CUDA graph (torch.cuda.graph, PyTorch's
"whole-network capture"), under PyTorch's allocator and under memkit: each allocator in
its own process, ResNet-50 (batch 64, SGD) or a GPT-2-style decoder (batch 8 x 512,
AdamW); the step is captured after warm-up on a side stream and replayed. Prints the
median replay time, the loss after the replays (the same model, seed and data under
both: the graph computes the same), and the memory each allocator reserves for it.

    python3 integrations/pytorch/graph_compare.py --lib build/libmemkit_torch.so \
        [--models resnet50 gpt2] [--replays 50] [--json F]
"""
import argparse
import json
import statistics
import subprocess
import sys
import time

from pluggable import read_statistics, use_memkit

RESULT = "GRAPH_COMPARE_RESULT "


def worker(model_name, allocator, lib, replays):
    import torch
    if allocator == "memkit":
        memkit_lib = use_memkit(lib, "graph_compare")
    torch.manual_seed(0)
    device = torch.device("cuda")
    if model_name == "resnet50":
        import torchvision
        model = torchvision.models.resnet50(weights=None).to(device)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        x = torch.randn(64, 3, 224, 224, device=device)
        y = torch.randint(0, 1000, (64,), device=device)
        loss_of = lambda: torch.nn.functional.cross_entropy(model(x), y)  # noqa: E731
    else:
        import transformers
        config = transformers.GPT2Config(n_layer=6, n_embd=768, n_head=12, n_positions=512)
        model = transformers.GPT2LMHeadModel(config).to(device)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, capturable=True)
        x = torch.randint(0, config.vocab_size, (8, 512), device=device)
        loss_of = lambda: model(x, labels=x).loss  # noqa: E731

    def step():
        optimizer.zero_grad(set_to_none=False)
        loss = loss_of()
        loss.backward()
        optimizer.step()
        return loss

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        loss = step()
    times = []
    for _ in range(replays):
        torch.cuda.synchronize()
        start = time.perf_counter()
        graph.replay()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - start) * 1e3)
    if allocator == "memkit":
        s = read_statistics(memkit_lib)
        reserved, allocated = s["peak_reserved_bytes"], s["peak_requested_bytes"]
    else:
        reserved = torch.cuda.max_memory_reserved()
        allocated = torch.cuda.max_memory_allocated()
    print(RESULT + json.dumps({
        "model": model_name, "allocator": allocator, "median_ms": statistics.median(times),
        "loss": float(loss), "peak_reserved": reserved, "peak_allocated": allocated}))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lib", required=True)
    parser.add_argument("--models", nargs="+", default=["resnet50", "gpt2"])
    parser.add_argument("--replays", type=int, default=50)
    parser.add_argument("--json")
    parser.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker[0], args.worker[1], args.lib, args.replays)
        return
    rows = []
    for model in args.models:
        for allocator in ("pytorch", "memkit"):
            run = subprocess.run([sys.executable, __file__, "--lib", args.lib, "--replays",
                                  str(args.replays), "--worker", model, allocator],
                                 capture_output=True, text=True)
            lines = [line for line in run.stdout.splitlines() if line.startswith(RESULT)]
            if run.returncode != 0 or not lines:
                sys.exit("[graph_compare] %s under %s failed:\n%s" % (model, allocator,
                                                                     run.stderr[-3000:]))
            row = json.loads(lines[-1][len(RESULT):])
            rows.append(row)
            print("%-9s %-8s replay %8.2f ms  loss %.6f  reserved / allocated %.3f "
                  "(%.0f MiB)" % (model, allocator, row["median_ms"], row["loss"],
                                  row["peak_reserved"] / row["peak_allocated"],
                                  row["peak_reserved"] / 2**20), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
