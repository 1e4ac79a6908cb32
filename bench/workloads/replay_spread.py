#!/usr/bin/env python3
"""Judges the allocator's defaults on the whole workload suite under several device
timings, since one replay of a loop that moves pages is one draw among many: a
change of placement moves a trace's figure by +-50% where another lag (when the
device completes each event's work) moves it as much. For each trace of
data/traces/workloads/ it replays `memkit replay --json` with no flags, with
--device-lag 2000, and with lags drawn per event (--lag-seed), and prints each
trace's largest reserved / live, its unmaps a step after the warm-up under each
setting and their mean, and the sum of the means: the figure to compare between two
builds. Each table also gives the mean of the maps a step after the warm-up (a page
moved is a map, and no unmap: its old place keeps it mapped, as a shadow, until
that place is needed), and their sum.

    bench/workloads/replay_spread.py build/memkit [--against OTHER] [--traces T...]
        [--jobs N] [-- FLAGS]

FLAGS after `--` go to every replay (e.g. `-- --arena-slack 0.03`). With --against,
OTHER (another build's memkit, the base) runs the same replays, and the table puts
its figures beside the first one's, per trace, with both sums.
"""
import concurrent.futures
import json
import os
import statistics
import subprocess

from replay_suite import parse_with_flags, suite_parser

TIMINGS = ["", "--device-lag 2000", "--device-lag 2000 --lag-seed 1",
           "--device-lag 2000 --lag-seed 2", "--device-lag 500 --lag-seed 3"]


def replay(memkit, trace, flags):
    out = subprocess.run([memkit, "replay", "--json"] + flags + [trace], capture_output=True,
                         text=True)
    if out.returncode != 0:
        raise SystemExit("[replay_spread] %s %s failed:\n%s" % (trace, " ".join(flags),
                                                                out.stderr))
    result = json.loads(out.stdout)
    return (result["reserved_over_live"], result["unmaps_after_warmup_per_step"],
            result["maps_after_warmup_per_step"])


def run_all(memkit, cases, jobs):
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        return list(pool.map(lambda case: replay(memkit, *case), cases))


def summarize(results, k):
    """Largest reserved / live, unmaps a step per timing, their mean, and the mean of
    the maps a step, of trace k."""
    rows = results[k * len(TIMINGS):(k + 1) * len(TIMINGS)]
    return (max(r[0] for r in rows), [r[1] for r in rows],
            statistics.mean(r[1] for r in rows), statistics.mean(r[2] for r in rows))


def main():
    parser = suite_parser(__doc__)
    parser.add_argument("--against", help="another memkit command, the base to compare with")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = parse_with_flags(parser)
    cases = [(trace, timing.split() + args.flags) for trace in args.traces for timing in TIMINGS]
    results = run_all(args.memkit, cases, args.jobs)
    base = run_all(args.against, cases, args.jobs) if args.against else None
    names = [os.path.basename(trace).split(".")[0] for trace in args.traces]
    total, base_total = 0.0, 0.0
    maps_total, base_maps_total = 0.0, 0.0
    if base:
        print("| trace | largest reserved / live: base | this | unmaps a step, mean of the "
              "timings: base | this | maps a step, mean: base | this |")
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    else:
        print("| trace | largest reserved / live | unmaps a step after warm-up: %s | mean | "
              "maps a step, mean |" % " / ".join(t or "default" for t in TIMINGS))
        print("| --- | ---: | ---: | ---: | ---: |")
    for k, name in enumerate(names):
        memory, unmaps, mean, maps = summarize(results, k)
        total += mean
        maps_total += maps
        if base:
            base_memory, _, base_mean, base_maps = summarize(base, k)
            base_total += base_mean
            base_maps_total += base_maps
            print("| %s | %.3f | %.3f | %.1f | %.1f | %.1f | %.1f |" %
                  (name, base_memory, memory, base_mean, mean, base_maps, maps))
        else:
            print("| %s | %.3f | %s | %.1f | %.1f |" %
                  (name, memory, " / ".join("%.1f" % u for u in unmaps), mean, maps))
    if base:
        print("\nsum of the means: base %.1f, this %.1f unmaps a step; maps: base %.1f, this %.1f"
              % (base_total, total, base_maps_total, maps_total))
    else:
        print("\nsum of the means: %.1f unmaps a step, %.1f maps a step" % (total, maps_total))

if __name__ == "__main__":
    main()
