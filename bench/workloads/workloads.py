#!/usr/bin/env python3
"""memkit's workload suite: real PyTorch loops (bench/workloads/loops.py), recorded as
allocation traces and compared under three allocators on a CUDA GPU.

    workloads.py list
    workloads.py record --out DIR [--loops L...] [--steps 35] [--jobs 4]
        Runs each loop (its own process, PyTorch's default allocator) with PyTorch's
        memory history on and writes DIR/<loop>.trace.csv.gz: memkit's trace format
        with a step marker line `s` before each iteration, and metadata (workload,
        source, steps, warmup_steps, PyTorch's peaks on that run). The loop runs as
        compare runs it (run_steps), warm-up and timed steps alike.
    workloads.py compare --lib libmemkit_torch.so [--loops L...] [--warmup 10]
                         [--steps 25] [--repeats 1] [--allocators A...] [--json F]
                         [--cpus LIST]
        Runs each loop in its own process under each allocator (in the order given,
        reversed every other loop and repeat: run_order): `pytorch` (PyTorch's
        default caching allocator), `expandable` (PyTorch with
        expandable_segments:True) and `memkit` (libmemkit_torch.so through
        CUDAPluggableAllocator, its defaults; `memkit:policy=P,arena_slack=F,lib=PATH`
        sets options), and prints per loop: the median step time over PyTorch's,
        peak reserved / peak allocated, and memkit's page maps and unmaps per timed
        step.

    workloads.py table [--latest] [--allocators A...] -- F.json [F.json...]
        The table compare prints, from the JSON files of one or more compare runs
        (runs of a loop under one allocator in several files are taken together;
        with --latest only those of the last file given that ran the loop), with the
        goals each loop misses; --allocators chooses the columns. Needs no GPU or
        PyTorch.

Step time: each timed step ends with torch.cuda.synchronize(); the median over the
timed steps is compared. Peak allocated: PyTorch's max_memory_allocated for PyTorch's
allocators; for memkit, its peak of requested bytes (what PyTorch asked for).
"""
import argparse
import ctypes
import gc
import gzip
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "integrations", "pytorch"))
from pluggable import read_statistics, use_memkit  # noqa: E402

RECORD_WARMUP = 10  # steps a recorded trace counts as warm-up (its metadata warmup_steps), as compare
COMPARE_STEPS = 25  # steps compare times after its warm-up; a recording covers both


def parse_allocator(spec):
    """(kind, environment, lib path or None) of 'pytorch', 'expandable', 'memkit' or
    'memkit:policy=P,arena_slack=F,plan_loops=0|1,thread_cache=0|1,order_queues=0|1,
    small_segments_in_arena=0|1,torch_timing=1,lib=PATH'."""
    name, _, options = spec.partition(":")
    if name not in ("pytorch", "expandable", "memkit") or (name != "memkit" and options):
        raise SystemExit("[workloads] unknown allocator '%s': expected pytorch, expandable or "
                         "memkit[:policy=P,arena_slack=F,lib=PATH]" % spec)
    env = {}
    lib = None
    if name == "expandable":
        env["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
    for item in filter(None, options.split(",")):
        key, _, value = item.partition("=")
        if key not in ("policy", "arena_slack", "plan_loops", "thread_cache", "order_queues",
                       "small_segments_in_arena", "torch_timing", "lib") or not value:
            raise SystemExit("[workloads] %s: options are policy=P, arena_slack=F, plan_loops=0|1, "
                             "thread_cache=0|1, order_queues=0|1, small_segments_in_arena=0|1, "
                             "torch_timing=1 (time spent in the allocator) and lib=PATH" % spec)
        if key == "lib":
            lib = os.path.abspath(value)
        else:
            env["MEMKIT_" + key.upper()] = value
    return name, env, lib


def make_loop(name, seed):
    import torch
    from loops import LOOPS
    torch.manual_seed(seed)
    torch.cuda.manual_seed_all(seed)
    torch.backends.cudnn.benchmark = False
    return LOOPS[name][0](torch.device("cuda", 0), seed)


def read_call_time(lib):
    ns, count = ctypes.c_uint64(), ctypes.c_uint64()
    lib.memkit_torch_get_call_time(ctypes.byref(ns), ctypes.byref(count))
    return ns.value, count.value


# Set for compare's children by --empty-cache-each-step.
EMPTY_CACHE_ENV = "WORKLOADS_EMPTY_CACHE"
# Set for compare's children by --memory-limit: the limit in bytes.
MEMORY_LIMIT_ENV = "WORKLOADS_MEMORY_LIMIT"
TRACES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "data", "traces",
                      "workloads")


def recorded_peak_allocated(name):
    """The loop's peak of allocated bytes under PyTorch when its trace was recorded."""
    with gzip.open(os.path.join(TRACES, name + ".trace.csv.gz"), "rt") as f:
        for line in f:
            if not line.startswith("#"):
                break
            key, _, value = line[1:].partition(":")
            if key.strip() == "pytorch_peak_allocated":
                return int(value)
    raise SystemExit("[workloads] %s: its trace names no pytorch_peak_allocated" % name)


def run_steps(step, warmup, steps, before_step=lambda: None, after_warmup=lambda: None,
              enqueue_times=None):
    """Runs the loop as compare times it, and record records it: warm-up steps whose
    loss is read at once, then timed steps that each keep their loss until the next
    one's is made (as a training script that logs it; a block it holds lives across
    the step boundary, which a plan learned in the warm-up must survive). Returns the
    losses and the timed steps' times (ms); a list given as enqueue_times gets each
    timed step's time until step() returned, before the synchronize (ms)."""
    import torch
    losses = []
    for _ in range(warmup):
        before_step()
        losses.append(step().item())
    torch.cuda.synchronize()
    # Python's collector would pause a step at random: it runs between the timed
    # steps instead, for every allocator alike.
    gc.collect()
    gc.disable()
    after_warmup()
    times = []
    for _ in range(steps):
        before_step()
        start = time.perf_counter()
        loss = step()
        if enqueue_times is not None:
            enqueue_times.append((time.perf_counter() - start) * 1000.0)
        torch.cuda.synchronize()
        times.append((time.perf_counter() - start) * 1000.0)
        losses.append(loss.item())
        gc.collect()
    gc.enable()
    return losses, times


def child_compare(name, allocator, lib_path, warmup, steps, seed):
    import torch
    kind = parse_allocator(allocator)[0]
    lib = None
    if kind == "memkit":
        lib = use_memkit(lib_path, "workloads")
    limit = int(os.environ.get(MEMORY_LIMIT_ENV, "0"))
    if limit:  # PyTorch's own limit, which reaches memkit through its hooks
        torch.cuda.set_per_process_memory_fraction(
            limit / torch.cuda.get_device_properties(0).total_memory)
    loop_step = make_loop(name, seed)
    empty_cache = os.environ.get(EMPTY_CACHE_ENV) == "1"

    empty_cache_times = []  # ms inside torch.cuda.empty_cache(), every step

    def step():  # with --empty-cache-each-step, as a script that empties it every step
        loss = loop_step()
        if empty_cache:
            start = time.perf_counter()
            torch.cuda.empty_cache()
            empty_cache_times.append((time.perf_counter() - start) * 1000.0)
        return loss
    before = {}

    def read_before():
        if lib:
            before.update(read_statistics(lib))
            before["call_time"] = read_call_time(lib)
    enqueue_times = []
    losses, times = run_steps(step, warmup, steps, after_warmup=read_before,
                              enqueue_times=enqueue_times)
    call_time_before = before.get("call_time")
    result = {"loop": name, "allocator": allocator, "step_ms": statistics.median(times),
              "step_times_ms": times, "losses": losses,
              "cpus": sorted(os.sched_getaffinity(0)), "last_cpu": last_cpu()}
    # Until step() returned (empty_cache included), before the synchronize.
    result["enqueue_ms"] = statistics.median(enqueue_times)
    if empty_cache:
        result["empty_cache_each_step"] = True
        result["empty_cache_ms"] = statistics.median(empty_cache_times[-steps:])
    if limit:
        result["memory_limit"] = limit
    if lib:
        stats = read_statistics(lib)
        result["maps_per_step"] = (stats["maps"] - before["maps"]) / steps
        result["unmaps_per_step"] = (stats["unmaps"] - before["unmaps"]) / steps
        result["waits_per_step"] = (stats["retries"] - before["retries"]) / steps
        if "moves" in stats:  # pages moved (a map each) and moved back at no cost
            result["moves_per_step"] = (stats["moves"] - before["moves"]) / steps
            result["returns_per_step"] = (stats["returns"] - before["returns"]) / steps
        result["peak_reserved"] = stats["peak_reserved_bytes"]
        result["peak_allocated"] = stats["peak_requested_bytes"]
        result["memkit"] = stats
        ns, count = read_call_time(lib)
        if count > call_time_before[1]:  # MEMKIT_TORCH_TIMING=1
            result["allocator_ms_per_step"] = (ns - call_time_before[0]) / steps / 1e6
            result["allocator_calls_per_step"] = (count - call_time_before[1]) / steps
    else:
        result["peak_reserved"] = torch.cuda.max_memory_reserved(0)
        result["peak_allocated"] = torch.cuda.max_memory_allocated(0)
    return result


def child_record(name, out_dir, steps, seed):
    """Records the loop's allocations, model construction included, as a memkit trace."""
    import torch
    from loops import LOOPS
    marker_stream = torch.cuda.Stream()
    try:
        torch.cuda.memory._record_memory_history(max_entries=8_000_000, context=None,
                                                 stacks="python")
    except TypeError:
        torch.cuda.memory._record_memory_history(max_entries=8_000_000)
    step = make_loop(name, seed)

    def mark():
        with torch.cuda.stream(marker_stream):  # an allocation here marks a new step
            torch.empty(1, device="cuda")
    warmup = min(RECORD_WARMUP, steps)
    run_steps(step, warmup, steps - warmup, before_step=mark)
    torch.cuda.synchronize()
    snapshot = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(None)
    marker_id = marker_stream.cuda_stream
    streams = {0: 0}
    ids = {}
    lines = []
    next_id = 0
    markers = 0
    skipped_frees = 0
    for entry in snapshot["device_traces"][0]:
        action = entry["action"]
        if action == "alloc":
            if entry["stream"] == marker_id:
                ids[entry["addr"]] = None
                lines.append("s")
                markers += 1
                continue
            stream = streams.setdefault(entry["stream"], len(streams))
            next_id += 1
            ids[entry["addr"]] = next_id
            lines.append("a,%d,%d,%d" % (next_id, entry["size"], stream))
        elif action == "free_requested":
            block = ids.pop(entry["addr"], -1)
            if block == -1:
                skipped_frees += 1
            elif block is not None:
                lines.append("f,%d" % block)
    if markers != steps:
        raise RuntimeError("[workloads] %s: %d step markers in the memory history, expected %d "
                           "(ring buffer too small?)" % (name, markers, steps))
    path = os.path.join(out_dir, name + ".trace.csv.gz")
    header = [
        "# workload: " + name,
        "# description: " + LOOPS[name][1],
        "# source: PyTorch %s memory history on %s, bench/workloads/workloads.py record"
        % (torch.__version__, torch.cuda.get_device_name(0)),
        "# recorded: " + time.strftime("%Y-%m-%d"),
        "# steps: %d" % steps,
        "# warmup_steps: %d" % RECORD_WARMUP,
        "# pytorch_peak_allocated: %d" % torch.cuda.max_memory_allocated(0),
        "# pytorch_peak_reserved: %d" % torch.cuda.max_memory_reserved(0),
    ]
    with gzip.open(path, "wt", compresslevel=9) as f:
        f.write("\n".join(header + lines) + "\n")
    return {"loop": name, "path": path, "allocations": next_id, "steps": steps,
            "skipped_frees": skipped_frees,
            "pytorch_peak_allocated": torch.cuda.max_memory_allocated(0),
            "pytorch_peak_reserved": torch.cuda.max_memory_reserved(0)}


def parse_cpus(text):
    """The CPU numbers of a list such as '8-11' or '2,5,7-9' (taskset's form)."""
    cpus = set()
    for part in text.split(","):
        # A range needs both ends ('3-' is not one, whatever the machine's CPUs).
        first, dash, last = part.partition("-")
        if not first.isdigit() or (dash and not last.isdigit()):
            raise SystemExit("[workloads] --cpus '%s': expected CPU numbers such as 8-11 or "
                             "2,5,7-9" % text)
        cpus.update(range(int(first), int(last or first) + 1))
    allowed = os.sched_getaffinity(0)
    if not cpus or not cpus <= allowed:
        raise SystemExit("[workloads] --cpus '%s': not among this process's CPUs (%s)"
                         % (text, ",".join(map(str, sorted(allowed)))))
    return sorted(cpus)


def last_cpu():
    """The CPU this process last ran on (/proc/self/stat's 39th field)."""
    with open("/proc/self/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[36])


def run_child(args_list, env=None, script=__file__, cpus=None):
    """Runs `script` (this one by default) in a child Python with args_list, on the
    CPUs given (all of this process's when None); its last RESULT line, parsed, and
    None, or None and what went wrong."""
    pin = (lambda: os.sched_setaffinity(0, cpus)) if cpus else None
    out = subprocess.run([sys.executable, os.path.abspath(script)] + args_list,
                         capture_output=True, text=True, env=env, preexec_fn=pin)
    lines = [l for l in out.stdout.splitlines() if l.startswith("RESULT ")]
    if out.returncode != 0 or not lines:
        return None, "exit %d:\n%s" % (out.returncode, out.stderr[-3000:])
    return json.loads(lines[-1][len("RESULT "):]), None


def command_record(args):
    from concurrent.futures import ThreadPoolExecutor
    os.makedirs(args.out, exist_ok=True)

    def one(name):
        result, error = run_child(["--child-record", name, args.out, str(args.steps),
                                   str(args.seed)])
        if error:
            print("[workloads] recording %s failed (%s)" % (name, error), flush=True)
        else:
            print("recorded %-24s %7d allocations, %d steps, PyTorch reserved / allocated "
                  "%.3f" % (name, result["allocations"], result["steps"],
                            result["pytorch_peak_reserved"] /
                            max(result["pytorch_peak_allocated"], 1)), flush=True)
        return result
    with ThreadPoolExecutor(args.jobs) as pool:
        results = list(pool.map(one, args.loops))
    return 0 if all(results) else 1


def command_compare(args):
    lib = os.path.abspath(args.lib) if args.lib else None
    for spec in args.allocators:
        kind, _, spec_lib = parse_allocator(spec)
        if kind == "memkit" and not (spec_lib or lib):
            raise SystemExit("[workloads] allocator '%s' needs --lib" % spec)
    cpus = parse_cpus(args.cpus) if args.cpus else None
    results = []
    started = time.monotonic()
    for index, name in enumerate(args.loops):
        if args.deadline and time.monotonic() - started > args.deadline:
            print("[workloads] deadline reached: %s and later loops not run" % name, flush=True)
            break
        limit = int(args.memory_limit * recorded_peak_allocated(name)) if args.memory_limit else 0
        for spec in run_order(args.allocators, args.repeats, index):
            _, env_extra, spec_lib = parse_allocator(spec)
            env = dict(os.environ, **env_extra)
            env[EMPTY_CACHE_ENV] = "1" if args.empty_cache_each_step else "0"
            env[MEMORY_LIMIT_ENV] = str(limit)
            result, error = run_child(["--child-compare", name, spec, spec_lib or lib or "",
                                       str(args.warmup), str(args.steps), str(args.seed)], env,
                                      cpus=cpus)
            if error:
                print("[workloads] %s with %s failed (%s)" % (name, spec, error), flush=True)
                lines = [l for l in error.splitlines() if l.strip()]
                results.append({"loop": name, "allocator": spec, "failed": True,
                                "error": lines[-1] if lines else error})
                continue
            results.append(result)
            print("%-24s %-12s %8.2f ms  reserved/allocated %.3f%s" % (
                name, spec, result["step_ms"],
                result["peak_reserved"] / max(result["peak_allocated"], 1),
                "  maps %.1f unmaps %.1f per step" % (result["maps_per_step"],
                                                      result["unmaps_per_step"])
                if "maps_per_step" in result else "") +
                ("  (moves %.1f, returns %.1f)" % (result["moves_per_step"],
                                                   result["returns_per_step"])
                 if "moves_per_step" in result else "") +
                ("  in the allocator %.2f ms a step (%.0f calls)" % (
                    result["allocator_ms_per_step"], result["allocator_calls_per_step"])
                 if "allocator_ms_per_step" in result else ""), flush=True)
            if args.json:  # after every run: a cut-short session keeps what ran
                with open(args.json, "w") as f:
                    json.dump(results, f, indent=1)
    print_table(results, args.loops, args.allocators)
    return 0 if not any(r.get("failed") for r in results) else 1


def run_order(allocators, repeats, loop_index):
    """The order compare runs one loop's allocators in: the list once a repeat, reversed
    when loop_index + repeat is odd. Repeats interleave the allocators, so that a drift
    in the machine hits all alike, and no allocator always runs in the same place (first,
    or right after another allocator's process): the place a run has changes its time
    (docs/BENCHMARKS.md)."""
    order = []
    for repeat in range(repeats):
        order += allocators if (loop_index + repeat) % 2 == 0 else allocators[::-1]
    return order


def paired_ratio(runs, base):
    """The median over timed steps of a step's time over PyTorch's same step (the loops
    draw the same batches for both), run i against PyTorch's run i: steps that the host
    slowed for both cancel out; None when the step counts differ."""
    ratios = []
    for run, base_run in zip(runs, base):
        times, base_times = run.get("step_times_ms"), base_run.get("step_times_ms")
        if not times or not base_times or len(times) != len(base_times):
            return None
        ratios += [t / b for t, b in zip(times, base_times) if b > 0]
    return statistics.median(ratios) if ratios else None


def mean_ratio(runs, base):
    """The mean timed step over PyTorch's mean timed step, over all runs of each (the
    loops draw the same shapes for both); None without the steps' times."""
    times = [t for r in runs for t in r.get("step_times_ms") or []]
    base_times = [t for r in base for t in r.get("step_times_ms") or []]
    if not times or not base_times or statistics.mean(base_times) <= 0:
        return None
    return statistics.mean(times) / statistics.mean(base_times)


def run_ratios(runs, base):
    """Run i's median step time over PyTorch's run i, for each pair of runs (repeats
    alternate the allocators): their spread is the spread between processes, which a
    single run cannot show."""
    return [r["step_ms"] / b["step_ms"] for r, b in zip(runs, base) if b["step_ms"] > 0]


def print_table(results, loops, allocators):
    """One row per loop: each allocator's median step time over PyTorch's (and, in
    parentheses, the paired ratio: paired_ratio; in brackets, with repeats, the lowest
    and highest ratio of one run to its PyTorch run: run_ratios) and peak reserved /
    peak allocated; memkit's mean step time over PyTorch's (mean_ratio: what a loop of
    steps of several shapes loses in its costly steps, which the median can pass over),
    its unmaps per timed step and the goals it misses (missed_goals)."""
    print("\n| loop | " + " | ".join("%s time / PyTorch's | %s reserved / allocated" % (a, a)
                                     for a in allocators) + " | memkit mean step / PyTorch's "
          "| memkit unmaps a step | memkit over the goal |")
    print("| --- |" + " ---: | ---: |" * len(allocators) + " ---: | ---: | --- |")
    for name in loops:
        runs = {}
        for r in results:
            if r["loop"] == name and not r.get("failed"):
                runs.setdefault(r["allocator"], []).append(r)
        if not any(r["loop"] == name for r in results):
            continue  # not run (deadline)
        base = runs.get("pytorch")
        base_ms = statistics.median(r["step_ms"] for r in base) if base else None
        cells = []
        unmaps = "-"
        mean = "-"
        over = []
        for a in allocators:
            if a not in runs:
                ran = any(r["loop"] == name and r["allocator"] == a for r in results)
                cells += ["failed", "failed"] if ran else ["-", "-"]
                continue
            ms = statistics.median(r["step_ms"] for r in runs[a])
            ratio = statistics.median(r["peak_reserved"] / max(r["peak_allocated"], 1)
                                      for r in runs[a])
            paired = paired_ratio(runs[a], base) if base and a != "pytorch" else None
            time_cell = "%.3f" % (ms / base_ms) if base_ms else "%.1f ms" % ms
            if paired is not None:
                time_cell += " (%.3f)" % paired
            spread = run_ratios(runs[a], base) if base and a != "pytorch" else []
            if len(spread) > 1:
                time_cell += " [%.3f-%.3f]" % (min(spread), max(spread))
            cells += [time_cell, "%.3f" % ratio]
            # memkit's default, or the first memkit variant when it did not run
            if "unmaps_per_step" in runs[a][0] and (a == "memkit" or unmaps == "-"):
                mean_unmaps = statistics.mean(r["unmaps_per_step"] for r in runs[a])
                unmaps = "%.1f" % mean_unmaps
                of_means = mean_ratio(runs[a], base) if base else None
                mean = "%.3f" % of_means if of_means is not None else "-"
                over = missed_goals(ms / base_ms if base_ms else None, paired, ratio,
                                    mean_unmaps)
        print("| %s | %s | %s | %s | %s |" % (name, " | ".join(cells), mean, unmaps,
                                             ", ".join(over) or "-"))


def missed_goals(time_ratio, paired, reserved_ratio, unmaps):
    """The goals of the default a row misses, as printed (three decimals): step time at
    most PyTorch's (over only when both the ratio of medians and the paired ratio are),
    peak reserved at most 1.02 x peak allocated, at most 5 unmaps a step."""
    over = []
    if time_ratio is not None and round(time_ratio, 3) > 1 and (paired is None or
                                                               round(paired, 3) > 1):
        over.append("time")
    if round(reserved_ratio, 3) > 1.02:
        over.append("memory")
    if round(unmaps, 1) > 5:
        over.append("unmaps")
    return over


def command_table(args):
    results, allocators, loops = [], [], []
    latest = {}  # with --latest: loop -> the last file that ran it
    for path in args.files:
        try:
            with open(path) as f:
                runs = json.load(f)
        except (OSError, ValueError) as error:
            raise SystemExit("[workloads table] %s: %s" % (path, error))
        if not isinstance(runs, list):
            raise SystemExit("[workloads table] %s: not a list of runs (compare --json writes one)"
                             % path)
        for i, r in enumerate(runs):
            needed = ["loop", "allocator"] + ([] if r.get("failed") else
                                              ["step_ms", "peak_reserved", "peak_allocated"])
            missing = [k for k in needed if not isinstance(r, dict) or k not in r]
            if missing:
                raise SystemExit("[workloads table] %s: run %d has no %s" % (
                    path, i, ", ".join(missing)))
            r = dict(r, file=path)
            latest[r["loop"]] = path
            results.append(r)
            if r["allocator"] not in allocators:
                allocators.append(r["allocator"])
            if r["loop"] not in loops:
                loops.append(r["loop"])
    if args.latest:
        results = [r for r in results if r["file"] == latest[r["loop"]]]
        loops = sorted(loops)
        for name in loops:
            print("%-28s %s" % (name, latest[name]))
    if args.allocators:
        allocators = args.allocators
    print_table(results, loops, allocators)
    return 0


def main():
    try:
        from loops import LOOPS
    except ImportError as error:  # no PyTorch here: only `table` runs
        LOOPS, missing = {}, error
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--child-record", nargs=4, help=argparse.SUPPRESS)
    parser.add_argument("--child-compare", nargs=6, help=argparse.SUPPRESS)
    sub = parser.add_subparsers(dest="command")
    sub.add_parser("list", help="the loops, with what each does")
    record = sub.add_parser("record", help="record each loop's allocation trace")
    record.add_argument("--out", required=True)
    record.add_argument("--steps", type=int, default=RECORD_WARMUP + COMPARE_STEPS,
                        help="steps recorded (default: the ones compare runs, warm-up and timed)")
    record.add_argument("--jobs", type=int, default=4,
                        help="loops recorded at once (recording does not time anything)")
    compare = sub.add_parser("compare", help="time each loop under each allocator")
    compare.add_argument("--lib", help="path of libmemkit_torch.so")
    compare.add_argument("--warmup", type=int, default=RECORD_WARMUP)
    compare.add_argument("--steps", type=int, default=COMPARE_STEPS)
    compare.add_argument("--repeats", type=int, default=1)
    compare.add_argument("--empty-cache-each-step", action="store_true",
                         help="call torch.cuda.empty_cache() at the end of every step, inside "
                         "its timing, as some scripts do")
    compare.add_argument("--memory-limit", type=float, default=0, metavar="X",
                         help="run each loop under a memory limit of X times its recorded "
                              "peak of allocated bytes (torch.cuda.set_per_process_memory_"
                              "fraction, which memkit gets too)")
    compare.add_argument("--allocators", nargs="+", default=["pytorch", "expandable", "memkit"])
    compare.add_argument("--json", help="write every run's result here (after each run)")
    compare.add_argument("--deadline", type=float, default=0,
                         help="seconds after which no further loop is started (0: none)")
    compare.add_argument("--cpus", metavar="LIST",
                         help="run every loop's process on these CPUs only (as taskset -c "
                              "LIST: 8-11; default: all). On the H100 it did not narrow the "
                              "spread between runs (docs/BENCHMARKS.md)")
    table = sub.add_parser("table", help="the table of compare runs' JSON files")
    table.add_argument("files", nargs="+")
    table.add_argument("--latest", action="store_true",
                       help="each loop from the last file (in the order given) that ran it, "
                       "loops in alphabetical order")
    table.add_argument("--allocators", nargs="+", metavar="A",
                       help="the columns, in this order (default: every allocator in the files)")
    for p in (record, compare):
        p.add_argument("--loops", nargs="+", default=list(LOOPS), choices=list(LOOPS),
                       metavar="LOOP")
        p.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    if args.child_record:
        name, out_dir, steps, seed = args.child_record
        print("RESULT " + json.dumps(child_record(name, out_dir, int(steps), int(seed))),
              flush=True)
        return 0
    if args.child_compare:
        name, spec, lib, warmup, steps, seed = args.child_compare
        print("RESULT " + json.dumps(child_compare(name, spec, lib, int(warmup), int(steps),
                                                   int(seed))), flush=True)
        return 0
    if args.command == "table":
        return command_table(args)
    if args.command and not LOOPS:
        raise SystemExit("[workloads] %s needs PyTorch: %s" % (args.command, missing))
    if args.command == "list":
        for name, (_, description) in LOOPS.items():
            print("%-24s %s" % (name, description))
        return 0
    if args.command == "record":
        return command_record(args)
    if args.command == "compare":
        return command_compare(args)
    parser.print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main())
