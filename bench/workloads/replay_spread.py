#!/usr/bin/env python3
"""Judges the allocator's defaults on the whole workload suite under several device
timings, since one replay of a loop that moves pages is one draw among many: a
change of placement moves a trace's figure by +-50% where another lag (when the
device completes each event's work) moves it as much. For each trace of
data/traces/workloads/ it replays `memkit replay --json` with no flags, with
--device-lag 2000, and with lags drawn per event (--lag-seed), and prints each
trace's largest reserved / live, its unmaps a step after the warm-up under each
setting and their mean, and the sum of the means: the figure to compare between two
builds.

    bench/workloads/replay_spread.py build/memkit [--traces T...] [--jobs N] [-- FLAGS]

FLAGS after `--` go to every replay (e.g. `-- --arena-slack 0.03`).
"""
import argparse
import concurrent.futures
import glob
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TIMINGS = ["", "--device-lag 2000", "--device-lag 2000 --lag-seed 1",
           "--device-lag 2000 --lag-seed 2", "--device-lag 500 --lag-seed 3"]


def replay(memkit, trace, flags):
    out = subprocess.run([memkit, "replay", "--json"] + flags + [trace], capture_output=True,
                         text=True)
    if out.returncode != 0:
        raise SystemExit("[replay_spread] %s %s failed:\n%s" % (trace, " ".join(flags),
                                                                out.stderr))
    result = json.loads(out.stdout)
    return result["reserved_over_live"], result["unmaps_after_warmup_per_step"]


def main():
    argv = sys.argv[1:]
    extra = []
    if "--" in argv:
        extra = argv[argv.index("--") + 1:]
        argv = argv[:argv.index("--")]
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("memkit", help="path of the memkit command")
    parser.add_argument("--traces", nargs="+",
                        default=sorted(glob.glob(os.path.join(ROOT, "data/traces/workloads/*.gz"))))
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args(argv)
    cases = [(trace, timing.split() + extra) for trace in args.traces for timing in TIMINGS]
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        results = list(pool.map(lambda case: replay(args.memkit, *case), cases))
    print("| trace | largest reserved / live | unmaps a step after warm-up: %s | mean |"
          % " / ".join(t or "default" for t in TIMINGS))
    print("| --- | ---: | ---: | ---: |")
    total = 0.0
    for k, trace in enumerate(args.traces):
        rows = results[k * len(TIMINGS):(k + 1) * len(TIMINGS)]
        mean = statistics.mean(r[1] for r in rows)
        total += mean
        name = os.path.basename(trace).split(".")[0]
        print("| %s | %.3f | %s | %.1f |" % (name, max(r[0] for r in rows),
                                           " / ".join("%.1f" % r[1] for r in rows), mean))
    print("\nsum of the means: %.1f unmaps a step" % total)


if __name__ == "__main__":
    main()
