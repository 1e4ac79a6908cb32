#!/usr/bin/env python3
"""The host cost of an allocator's calls as PyTorch makes them: a recorded loop's
allocations and frees (its steps after the warm-up) replayed through torch.empty and
del on the GPU, with no kernel between them, under each allocator in its own process.
The ns an event of a replay are the Python loop's, PyTorch's tensor machinery's and the
allocator's together; the differences between allocators are theirs:

    bare (bare_allocator.cpp through CUDAPluggableAllocator: a list per size, nearly
    free) - pytorch   = the pluggable interface's cost over PyTorch's own allocator
    memkit - bare     = memkit's own cost over the cheapest allocator
    memkit:torch_timing=1 also gives the time measured inside memkit's calls.

    call_cost.py --lib libmemkit_torch.so [--bare-lib libbare_allocator.so]
        [--traces T...] [--steps 5] [--repeats 5] [--allocators A...] [--json F]

Allocators as workloads.py names them (pytorch, expandable, memkit[:options]), and bare.
"""
import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import step_structure  # noqa: E402
from workloads import parse_allocator, read_call_time, run_child  # noqa: E402
from pluggable import use_memkit  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def read_events(path, steps):
    """(allocate?, block, size) of `steps` steps after the trace's warm-up; frees of
    blocks allocated before them are left out."""
    events, live = [], set()
    for step in step_structure.read_steps(path)[:steps]:
        for e in step:
            if e[0] == "a":
                events.append((True, e[1], e[2]))
                live.add(e[1])
            elif e[1] in live:
                events.append((False, e[1], 0))
                live.discard(e[1])
    return events


def child(allocator, lib_path, bare_lib, trace, steps, repeats):
    import torch
    kind = parse_allocator(allocator)[0] if allocator != "bare" else "bare"
    lib = None
    if kind == "memkit":
        lib = use_memkit(lib_path, "call_cost")
    elif kind == "bare":
        torch.cuda.memory.change_current_allocator(torch.cuda.memory.CUDAPluggableAllocator(
            bare_lib, "bare_malloc", "bare_free"))
    events = read_events(trace, steps)
    device = torch.device("cuda", 0)
    empty, u8 = torch.empty, torch.uint8

    def one_pass():
        tensors = {}
        start = time.perf_counter_ns()
        for allocate, block, size in events:
            if allocate:
                tensors[block] = empty(size, dtype=u8, device=device)
            else:
                del tensors[block]
        elapsed = time.perf_counter_ns() - start
        tensors.clear()
        return elapsed

    one_pass()  # warm-up: the allocator's caches, PyTorch's first calls
    before = read_call_time(lib) if lib else None
    times = [one_pass() for _ in range(repeats)]
    result = {"allocator": allocator, "trace": os.path.basename(trace).split(".")[0],
              "events": len(events), "ns_per_event": statistics.median(times) / len(events),
              "ns_per_event_all": [t / len(events) for t in times]}
    if lib:
        ns, count = read_call_time(lib)
        if count > before[1]:
            result["ns_inside_per_call"] = (ns - before[0]) / (count - before[1])
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lib", required=True)
    parser.add_argument("--bare-lib")
    parser.add_argument("--traces", nargs="+", default=[
        os.path.join(ROOT, "data/traces/workloads/%s.trace.csv.gz" % t)
        for t in ("vit_b16_adamw_bf16", "efficientnet_varbatch", "swin_tiny_adamw_bf16")])
    parser.add_argument("--allocators", nargs="+",
                        default=["pytorch", "bare", "memkit", "memkit:torch_timing=1"])
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=2,
                        help="each allocator's process runs this many times, alternated")
    parser.add_argument("--json")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--trace", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print("RESULT " + json.dumps(child(args.child, args.lib, args.bare_lib, args.trace,
                                            args.steps, args.repeats)), flush=True)
        return 0
    if "bare" in args.allocators and not args.bare_lib:
        sys.exit("[call_cost] the bare allocator needs --bare-lib (bare_allocator.cpp, built)")
    results = []
    for trace in args.traces:
        for _ in range(args.rounds):
            for allocator in args.allocators:
                env = dict(os.environ)
                if allocator != "bare":
                    env.update(parse_allocator(allocator)[1])
                r, error = run_child(
                    ["--child", allocator, "--lib", args.lib, "--bare-lib", args.bare_lib or "",
                     "--trace", trace, "--steps", str(args.steps), "--repeats", str(args.repeats)],
                    env, script=__file__)
                if error:
                    print("[call_cost] %s on %s failed: %s" % (allocator, trace, error))
                    continue
                results.append(r)
                print("%-24s %-26s %6d events  %7.1f ns an event%s" % (
                    r["trace"], allocator, r["events"], r["ns_per_event"],
                    "  (%.1f ns inside memkit a call)" % r["ns_inside_per_call"]
                    if "ns_inside_per_call" in r else ""), flush=True)
                if args.json:
                    with open(args.json, "w") as f:
                        json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
