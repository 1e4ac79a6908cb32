#!/usr/bin/env python3
"""Where a loop's step time goes under each allocator: the host's time to enqueue a
step (until step() returns) against the step's whole time (after a synchronize), and,
under torch.profiler over the last steps, the device's kernel time a step and the
kernels that differ most between allocators. Tells a slower step that comes from the
device (kernels slower over the same memory layout, e.g. pages mapped one by one)
from one that comes from the host (the allocator's calls, the pluggable path).

  python3 bench/workloads/kernel_time.py --lib build/libmemkit_torch.so \
      --loops resnet18_eval_varbatch --allocators pytorch memkit memkit:policy=segments \
      --repeats 2 --json out.json
Each run is a process of its own (the allocator is chosen before CUDA starts)."""
import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import workloads  # noqa: E402


def child(name, spec, lib_path, warmup, steps, profiled, seed):
    import torch
    if workloads.parse_allocator(spec)[0] == "memkit":
        workloads.use_memkit(lib_path, "kernel_time")
    step = workloads.make_loop(name, seed)
    enqueue = []
    whole = workloads.run_steps(step, warmup, steps, enqueue_times=enqueue)[1]
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(profiled):
            step().item()
        torch.cuda.synchronize()
    kernels = {}
    starts, ends, total, count = [], [], 0.0, 0
    for event in prof.events():
        # Device-side events only; a user annotation's range (the optimizer's step)
        # spans kernels rather than being one.
        if str(event.device_type).endswith("CUDA") and not getattr(
                event, "is_user_annotation", False):
            us = event.time_range.end - event.time_range.start
            total += us
            count += 1
            starts.append(event.time_range.start)
            ends.append(event.time_range.end)
            kernels[event.name] = kernels.get(event.name, 0.0) + us
    host_calls = {}
    for event in prof.key_averages():
        if event.key.startswith("cuda") or "memkit" in event.key.lower():
            host_calls[event.key] = [event.count, event.cpu_time_total]
    return {"loop": name, "allocator": spec, "enqueue_ms": statistics.median(enqueue),
            "step_ms": statistics.median(whole), "enqueue_times_ms": enqueue,
            "step_times_ms": whole, "kernel_ms_per_step": total / 1e3 / profiled,
            "device_span_ms_per_step": (max(ends) - min(starts)) / 1e3 / profiled
            if starts else 0.0,
            "kernels_per_step": count / profiled,
            "kernel_us": {k: v / profiled for k, v in kernels.items()},
            "host_calls": host_calls, "cpus": sorted(os.sched_getaffinity(0)),
            "last_cpu": workloads.last_cpu()}


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--child", nargs=7, help=argparse.SUPPRESS)
    parser.add_argument("--lib")
    parser.add_argument("--loops", nargs="+", default=["resnet18_eval_varbatch"])
    parser.add_argument("--allocators", nargs="+", default=["pytorch", "memkit"])
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--steps", type=int, default=25)
    parser.add_argument("--profiled", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json")
    parser.add_argument("--cpus", metavar="LIST",
                        help="run every process on these CPUs only (workloads.py compare's --cpus)")
    args = parser.parse_args()
    if args.child:
        name, spec, lib, warmup, steps, profiled, seed = args.child
        result = child(name, spec, lib, int(warmup), int(steps), int(profiled), int(seed))
        print("RESULT " + json.dumps(result))
        return 0
    cpus = workloads.parse_cpus(args.cpus) if args.cpus else None
    results = []
    for index, name in enumerate(args.loops):
        for spec in workloads.run_order(args.allocators, args.repeats, index):
            _, env_extra, spec_lib = workloads.parse_allocator(spec)
            result, error = workloads.run_child(
                ["--child", name, spec, spec_lib or args.lib or "", str(args.warmup),
                 str(args.steps), str(args.profiled), str(args.seed)],
                dict(os.environ, **env_extra), script=__file__, cpus=cpus)
            if error:
                print("[kernel_time] %s with %s failed (%s)" % (name, spec, error), flush=True)
                continue
            results.append(result)
            print("%-24s %-24s step %7.2f ms  enqueue %7.2f ms  kernels %7.2f ms  "
                  "device span %7.2f ms  (cpu %d of %d)" % (
                      name, spec, result["step_ms"], result["enqueue_ms"],
                      result["kernel_ms_per_step"], result["device_span_ms_per_step"],
                      result["last_cpu"], len(result["cpus"])), flush=True)
            if args.json:
                with open(args.json, "w") as f:
                    json.dump(results, f, indent=1)
    # The kernels whose time differs most between the first allocator and each other.
    for name in args.loops:
        runs = [r for r in results if r["loop"] == name]
        base = [r for r in runs if r["allocator"] == args.allocators[0]]
        if not base:
            continue
        for spec in args.allocators[1:]:
            other = [r for r in runs if r["allocator"] == spec]
            if not other:
                continue
            names = set(base[0]["kernel_us"]) | set(other[0]["kernel_us"])

            def mean_us(rs, k):
                return statistics.mean(r["kernel_us"].get(k, 0.0) for r in rs)
            diffs = sorted(names, key=lambda k: -abs(mean_us(other, k) - mean_us(base, k)))
            print("\n%s: %s against %s, kernel time a step (us), largest differences" % (
                name, spec, args.allocators[0]))
            for k in diffs[:12]:
                print("  %9.1f %9.1f  %s" % (mean_us(base, k), mean_us(other, k), k[:110]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
