#!/usr/bin/env python3
"""Data-parallel training on several GPUs under three allocators: PyTorch's own,
PyTorch's expandable segments, and memkit (memkit.torch.enable()). Each run starts N
ranks of this file's worker, as `torchrun --standalone --nproc_per_node N` would (the
worker runs under torchrun as it is), with one allocator, one wrapper (DDP or FSDP) and one model (ResNet-50, batch 64 a rank, SGD; or GPT-2 small from its
config, batch 8 x 512 a rank, AdamW, bf16 autocast); every rank prints its median step
time, peak reserved and peak allocated (memkit's own statistics for memkit) and its
losses. The driver runs every combination and prints one table.

    python3 integrations/pytorch/ddp_compare.py --nproc 2 [--models resnet50 gpt2]
        [--modes ddp fsdp] [--allocators pytorch expandable memkit] [--steps 20]
        [--warmup 5] [--json results.json]

memkit.torch must be importable (PYTHONPATH=build/python, or the installed package).
All runs set TORCH_NCCL_AVOID_RECORD_STREAMS=1: a pluggable allocator gets no
record_stream calls from PyTorch, so the process group keeps the tensors of a
collective alive until it completes instead (the same for every allocator).

`--device cpu` runs the same worker over gloo on the CPU (DDP only, PyTorch's
allocator only), for checking the script where there is no GPU.
"""
import argparse
import contextlib
import functools
import json
import os
import statistics
import subprocess
import sys
import time

RESULT = "DDP_COMPARE_RESULT "


def build_model(name, device, tiny):
    import torch
    if name == "resnet50":
        import torchvision
        model = (torchvision.models.resnet18 if tiny else torchvision.models.resnet50)(
            weights=None, num_classes=10 if tiny else 1000)
        batch = (4, 3, 32, 32) if tiny else (64, 3, 224, 224)
        classes = 10 if tiny else 1000

        def make_batch(generator):
            x = torch.randn(*batch, generator=generator).to(device)
            y = torch.randint(0, classes, (batch[0],), generator=generator).to(device)
            return x, y

        def loss_of(model, x, y):
            return torch.nn.functional.cross_entropy(model(x), y)
        return model.to(device), make_batch, loss_of, "sgd"
    if name == "gpt2":
        from transformers import GPT2Config, GPT2LMHeadModel
        config = GPT2Config(n_layer=2, n_embd=64, n_head=2) if tiny else GPT2Config()
        model = GPT2LMHeadModel(config)
        shape = (2, 32) if tiny else (8, 512)

        def make_batch(generator):
            ids = torch.randint(0, config.vocab_size, shape, generator=generator).to(device)
            return ids, ids

        def loss_of(model, x, y):
            return model(input_ids=x, labels=y).loss
        return model.to(device), make_batch, loss_of, "adamw"
    raise SystemExit("[ddp_compare] unknown model '%s'" % name)


def worker(args):
    """One rank of a torchrun launch: trains and prints its result as one JSON line."""
    rank = int(os.environ["RANK"])
    local_rank = int(os.environ["LOCAL_RANK"])
    world = int(os.environ["WORLD_SIZE"])
    if args.allocator == "memkit":
        import memkit.torch as mt
        mt.enable()  # before the first CUDA allocation of this process
    import torch
    import torch.distributed as dist
    on_gpu = args.device == "cuda"
    if on_gpu:
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device("cpu")
    dist.init_process_group("nccl" if on_gpu else "gloo")
    torch.manual_seed(args.seed)  # the same weights on every rank
    model, make_batch, loss_of, optimizer_name = build_model(args.model, device, args.tiny)
    if args.mode == "ddp":
        from torch.nn.parallel import DistributedDataParallel
        model = DistributedDataParallel(model, device_ids=[local_rank] if on_gpu else None)
    else:
        from torch.distributed.fsdp import FullyShardedDataParallel
        from torch.distributed.fsdp.wrap import size_based_auto_wrap_policy
        # A unit a block of layers (1M parameters or more): per-unit all-gathers and
        # frees, as FSDP is used.
        policy = functools.partial(size_based_auto_wrap_policy, min_num_params=1_000_000)
        model = FullyShardedDataParallel(model, auto_wrap_policy=policy,
                                         device_id=local_rank if on_gpu else None)
    if optimizer_name == "sgd":
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    else:
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    generator = torch.Generator().manual_seed(args.seed * 1000 + rank)  # each rank its data
    autocast = args.model == "gpt2" and on_gpu
    times, losses = [], []
    for step in range(args.warmup + args.steps):
        x, y = make_batch(generator)
        if on_gpu:
            torch.cuda.synchronize()
        start = time.perf_counter()
        with (torch.autocast("cuda", dtype=torch.bfloat16) if autocast
              else contextlib.nullcontext()):
            loss = loss_of(model, x, y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if on_gpu:
            torch.cuda.synchronize()
        if step >= args.warmup:
            times.append((time.perf_counter() - start) * 1e3)
        losses.append(float(loss.detach()))
    result = {"rank": rank, "world": world, "model": args.model, "mode": args.mode,
              "allocator": args.allocator, "step_ms": statistics.median(times),
              "step_times_ms": times, "losses": losses}
    if on_gpu and args.allocator == "memkit":
        import memkit.torch as mt
        stats = mt.statistics(local_rank)
        result.update(peak_reserved=stats["peak_reserved_bytes"],
                      peak_allocated=stats["peak_requested_bytes"],
                      maps=stats["maps"], unmaps=stats["unmaps"])
    elif on_gpu:
        result.update(peak_reserved=torch.cuda.max_memory_reserved(device),
                      peak_allocated=torch.cuda.max_memory_allocated(device))
    print(RESULT + json.dumps(result), flush=True)
    dist.barrier()
    dist.destroy_process_group()


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(args, model, mode, allocator):
    """The worker's ranks as torchrun --standalone starts them (one process each, with
    RANK, LOCAL_RANK, WORLD_SIZE and a rendezvous address); the ranks' results, or
    None and the output tail."""
    env = dict(os.environ, TORCH_NCCL_AVOID_RECORD_STREAMS="1", MASTER_ADDR="127.0.0.1",
               MASTER_PORT=str(free_port()), WORLD_SIZE=str(args.nproc),
               LOCAL_WORLD_SIZE=str(args.nproc))
    env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
    if allocator == "expandable":
        env["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
    command = [sys.executable, os.path.abspath(__file__), "--worker", "--model", model,
               "--mode", mode, "--allocator", allocator, "--steps", str(args.steps),
               "--warmup", str(args.warmup), "--seed", str(args.seed),
               "--device", args.device] + (["--tiny"] if args.tiny else [])
    ranks = [subprocess.Popen(command, env=dict(env, RANK=str(r), LOCAL_RANK=str(r)),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for r in range(args.nproc)]
    outputs, failed = [], False
    for rank in ranks:
        try:
            out, _ = rank.communicate(timeout=args.timeout)
        except subprocess.TimeoutExpired:
            for r in ranks:
                r.kill()
            out, _ = rank.communicate()
            failed = True
        outputs.append(out)
        failed |= rank.returncode != 0
    results = [json.loads(line[len(RESULT):]) for out in outputs for line in out.splitlines()
               if line.startswith(RESULT)]
    if failed or len(results) != args.nproc:
        return None, "\n".join(out[-1500:] for out in outputs)
    return sorted(results, key=lambda r: r["rank"]), None


def print_table(runs, args):
    print("\n| model | mode | allocator | step ms (slowest rank) | time / PyTorch's | "
          "reserved / allocated per rank | last loss per rank |")
    print("| --- | --- | --- | ---: | ---: | --- | --- |")
    for (model, mode), by_allocator in runs.items():
        base = by_allocator.get("pytorch")
        for allocator, results in by_allocator.items():
            ms = max(r["step_ms"] for r in results)  # the slowest rank sets the pace
            ratio = "%.3f" % (ms / max(r["step_ms"] for r in base)) if base else "-"
            memory = ", ".join("%.3f" % (r["peak_reserved"] / max(r["peak_allocated"], 1))
                               if "peak_reserved" in r else "-" for r in results)
            loss = ", ".join("%.4f" % r["losses"][-1] for r in results)
            print("| %s | %s | %s | %.2f | %s | %s | %s |" % (
                model, mode, allocator, ms, ratio, memory, loss))


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--model", help=argparse.SUPPRESS)
    parser.add_argument("--mode", help=argparse.SUPPRESS)
    parser.add_argument("--allocator", help=argparse.SUPPRESS)
    parser.add_argument("--models", nargs="+", default=["resnet50", "gpt2"],
                        choices=["resnet50", "gpt2"])
    parser.add_argument("--modes", nargs="+", default=["ddp", "fsdp"], choices=["ddp", "fsdp"])
    parser.add_argument("--allocators", nargs="+", default=["pytorch", "expandable", "memkit"],
                        choices=["pytorch", "expandable", "memkit"])
    parser.add_argument("--nproc", type=int, default=2)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    parser.add_argument("--tiny", action="store_true",
                        help="small models and batches (a check of the script, not a measure)")
    parser.add_argument("--timeout", type=float, default=600, help="seconds a launch may take")
    parser.add_argument("--json", help="write every rank's result here (after each launch)")
    args = parser.parse_args()
    if args.worker:
        return worker(args)
    if args.device == "cpu" and (set(args.modes) != {"ddp"} or set(args.allocators) != {"pytorch"}):
        raise SystemExit("[ddp_compare] --device cpu runs DDP with PyTorch's allocator only "
                         "(--modes ddp --allocators pytorch)")
    runs, everything, failed = {}, [], False
    for model in args.models:
        for mode in args.modes:
            for allocator in args.allocators:
                results, error = launch(args, model, mode, allocator)
                if results is None:
                    failed = True
                    print("[ddp_compare] %s %s %s failed:\n%s" % (model, mode, allocator, error),
                          flush=True)
                    continue
                runs.setdefault((model, mode), {})[allocator] = results
                everything.extend(results)
                print("%-9s %-5s %-11s %s" % (model, mode, allocator, "  ".join(
                    "rank %d %.2f ms" % (r["rank"], r["step_ms"]) for r in results)), flush=True)
                if args.json:
                    with open(args.json, "w") as f:
                        json.dump(everything, f, indent=1)
    print_table(runs, args)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
