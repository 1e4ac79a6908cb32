#!/usr/bin/env python3
"""How an allocator's step time compares with PyTorch's across many compare runs: for
each loop, every JSON file of `workloads.py compare` that ran both gives one ratio (the
allocator's median step time over PyTorch's in that file; repeats pooled per file),
and the script prints per loop how many files, the median ratio, how many were over
1.00, and the lowest and highest. A loop over 1.00 in most files is slower for a
reason that one noisy run cannot show (nor hide).

    python3 bench/workloads/time_spread.py [--allocator memkit] FILE.json...
"""
import argparse
import collections
import json
import statistics
import sys


def ratios(paths, allocator="memkit"):
    """{loop: [ratio per file]} over the files that ran `allocator` and pytorch."""
    out = collections.defaultdict(list)
    for path in paths:
        try:
            with open(path) as f:
                runs = json.load(f)
        except (OSError, ValueError) as e:
            sys.exit("[time_spread] %s: not a compare JSON file (%s)" % (path, e))
        if not isinstance(runs, list):
            sys.exit("[time_spread] %s: not a compare JSON file (a list of runs)" % path)
        steps = collections.defaultdict(lambda: collections.defaultdict(list))
        for r in runs:
            if isinstance(r, dict) and "loop" in r and "step_ms" in r and "allocator" in r:
                steps[r["loop"]][r["allocator"]].append(r["step_ms"])
        for loop, by in steps.items():
            if "pytorch" in by and allocator in by:
                out[loop].append(statistics.median(by[allocator]) / statistics.median(by["pytorch"]))
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--allocator", default="memkit", help="as named in the runs")
    parser.add_argument("files", nargs="+")
    args = parser.parse_args()
    found = ratios(args.files, args.allocator)
    print("| loop | files | median time / PyTorch's | over 1.00 | lowest | highest |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for loop in sorted(found, key=lambda k: -statistics.median(found[k])):
        r = found[loop]
        print("| %s | %d | %.3f | %d | %.3f | %.3f |" % (loop, len(r), statistics.median(r),
                                                       sum(x > 1.0 for x in r), min(r), max(r)))


if __name__ == "__main__":
    main()
