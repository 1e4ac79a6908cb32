#!/usr/bin/env python3
"""Trains ResNet-50 (batch 64, SGD) and GPT-2 small from its config (random weights,
batch 8 x 512, AdamW) for a few steps, once with PyTorch's own CUDA allocator and once
with memkit (libmemkit_torch.so through CUDAPluggableAllocator), each in its own
process with the same seed, and prints step time, peak reserved, peak allocated and
the losses.

    python3 train_compare.py --lib build/libmemkit_torch.so [--models resnet50 gpt2]
                             [--steps 10] [--warmup 3] [--repeats 1] [--json results.json]

Peak figures: PyTorch's run reads torch.cuda.max_memory_reserved/allocated; memkit's
reads memkit's own statistics (a pluggable allocator has no PyTorch statistics):
peak reserved bytes and peak requested bytes (what PyTorch asked for).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from pluggable import read_statistics, use_memkit


def parse_allocator(spec):
    """'pytorch', 'memkit' or 'memkit:policy=segments,arena_slack=0.02,lib=PATH':
    (name, env, lib path or None). lib compares two builds of memkit in one run."""
    name, _, options = spec.partition(":")
    if name not in ("pytorch", "memkit") or (name == "pytorch" and options):
        raise SystemExit("[train_compare] unknown allocator '%s'" % spec)
    env = {}
    lib = None
    for item in filter(None, options.split(",")):
        key, _, value = item.partition("=")
        if key not in ("policy", "arena_slack", "lib") or not value:
            raise SystemExit("[train_compare] '%s': options are policy=P, arena_slack=F and "
                             "lib=PATH" % spec)
        if key == "lib":
            lib = os.path.abspath(value)
        else:
            env["MEMKIT_" + key.upper()] = value
    return name, env, lib


def run_one(model_name, allocator, lib_path, steps, warmup, seed):
    import torch
    lib = None
    if parse_allocator(allocator)[0] == "memkit":
        lib = use_memkit(lib_path, "train_compare")
    torch.manual_seed(seed)
    torch.cuda.manual_seed_all(seed)
    device = torch.device("cuda", 0)

    if model_name == "resnet50":
        import torchvision
        model = torchvision.models.resnet50(weights=None).to(device)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        loss_fn = torch.nn.CrossEntropyLoss()
        generator = torch.Generator(device=device).manual_seed(seed)

        def step():
            images = torch.randn(64, 3, 224, 224, device=device, generator=generator)
            labels = torch.randint(0, 1000, (64,), device=device, generator=generator)
            optimizer.zero_grad(set_to_none=True)
            loss = loss_fn(model(images), labels)
            loss.backward()
            optimizer.step()
            return loss
    else:
        from transformers import GPT2Config, GPT2LMHeadModel
        config = GPT2Config()  # GPT-2 small: 12 layers, 768 wide, 124M parameters
        model = GPT2LMHeadModel(config).to(device)
        model.train()
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
        generator = torch.Generator(device=device).manual_seed(seed)

        def step():
            tokens = torch.randint(0, config.vocab_size, (8, 512), device=device,
                                   generator=generator)
            optimizer.zero_grad(set_to_none=True)
            loss = model(input_ids=tokens, labels=tokens).loss
            loss.backward()
            optimizer.step()
            return loss

    losses = []
    for _ in range(warmup):
        losses.append(step().item())
    torch.cuda.synchronize()
    before = read_statistics(lib) if lib else None
    start = time.perf_counter()
    timed = [step() for _ in range(steps)]
    torch.cuda.synchronize()
    step_ms = (time.perf_counter() - start) * 1000.0 / steps
    losses += [loss.item() for loss in timed]

    result = {"model": model_name, "allocator": allocator, "step_ms": step_ms,
              "losses": losses}
    if lib:
        stats = read_statistics(lib)
        # Steady state: the arena's page maps and unmaps per timed step.
        result["maps_per_step"] = (stats["maps"] - before["maps"]) / steps
        result["unmaps_per_step"] = (stats["unmaps"] - before["unmaps"]) / steps
        result["waits_per_step"] = (stats["retries"] - before["retries"]) / steps
        result["peak_reserved"] = stats["peak_reserved_bytes"]
        result["peak_allocated"] = stats["peak_requested_bytes"]
        result["memkit"] = stats
    else:
        result["peak_reserved"] = torch.cuda.max_memory_reserved(device)
        result["peak_allocated"] = torch.cuda.max_memory_allocated(device)
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lib", required=True, help="path of libmemkit_torch.so")
    parser.add_argument("--models", nargs="+", default=["resnet50", "gpt2"])
    parser.add_argument("--allocators", nargs="+", default=["pytorch", "memkit"],
                        help="pytorch, memkit, or memkit:policy=P,arena_slack=F,lib=PATH")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=1,
                        help="runs of each allocator, interleaved; step times compare by median")
    parser.add_argument("--rtol", type=float, default=1e-4,
                        help="relative tolerance for the losses to match")
    parser.add_argument("--json", help="write every result here")
    parser.add_argument("--child", nargs=2, metavar=("MODEL", "ALLOCATOR"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    lib = os.path.abspath(args.lib)

    if args.child:
        result = run_one(args.child[0], args.child[1], lib, args.steps, args.warmup, args.seed)
        print("RESULT " + json.dumps(result), flush=True)
        return 0

    results = []
    for allocator in args.allocators:
        parse_allocator(allocator)  # a bad name stops the run before any training
    for model in args.models:
        # Repeats interleave the allocators, so a drift in the machine hits all alike.
        for allocator in [a for _ in range(args.repeats) for a in args.allocators]:
            _, allocator_env, allocator_lib = parse_allocator(allocator)
            env = dict(os.environ, **allocator_env)
            out = subprocess.run(
                [sys.executable, __file__, "--lib", allocator_lib or lib, "--steps", str(args.steps),
                 "--warmup", str(args.warmup), "--seed", str(args.seed),
                 "--child", model, allocator],
                capture_output=True, text=True, env=env)
            lines = [l for l in out.stdout.splitlines() if l.startswith("RESULT ")]
            if out.returncode != 0 or not lines:
                print("[train_compare] %s with %s failed (exit %d):\n%s" %
                      (model, allocator, out.returncode, out.stderr[-3000:]))
                results.append({"model": model, "allocator": allocator, "failed": True})
                continue
            results.append(json.loads(lines[-1][len("RESULT "):]))

    print("\n%-9s %-28s %10s %16s %16s %9s  %s" % ("model", "alloc", "step ms", "peak reserved",
                                                  "peak allocated", "res/alloc", "losses"))
    ok = True
    for r in results:
        if r.get("failed"):
            ok = False
            continue
        ratio = r["peak_reserved"] / max(r["peak_allocated"], 1)
        print("%-9s %-28s %10.2f %16d %16d %9.3f  %s" % (
            r["model"], r["allocator"], r["step_ms"], r["peak_reserved"], r["peak_allocated"],
            ratio, " ".join("%.6f" % l for l in r["losses"])))
    for model in args.models:
        runs = {}
        for r in results:
            if r["model"] == model and not r.get("failed"):
                runs.setdefault(r["allocator"], []).append(r)
        if "pytorch" not in runs:
            continue
        base = runs["pytorch"][0]
        base_ms = statistics.median(r["step_ms"] for r in runs["pytorch"])
        for name, repeats in runs.items():
            if name == "pytorch":
                continue
            worst = max(abs(x - y) / max(abs(x), 1e-12)
                        for run in repeats for x, y in zip(base["losses"], run["losses"]))
            match = worst <= args.rtol
            ok &= match
            median_ms = statistics.median(r["step_ms"] for r in repeats)
            print("%s %s: median step time / pytorch's %.4f over %d run(s); losses %s (largest "
                  "relative difference %.2e); per timed step %.1f page maps, %.1f unmaps, "
                  "%.2f waits for queued work"
                  % (model, name, median_ms / base_ms, len(repeats),
                     "match" if match else "DIFFER", worst,
                     statistics.mean(r.get("maps_per_step", 0) for r in repeats),
                     statistics.mean(r.get("unmaps_per_step", 0) for r in repeats),
                     statistics.mean(r.get("waits_per_step", 0) for r in repeats)))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
