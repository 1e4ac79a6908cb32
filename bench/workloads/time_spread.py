#!/usr/bin/env python3
"""How an allocator's step time compares with PyTorch's across many compare runs: for
each loop, every JSON file of `workloads.py compare` that ran both gives one ratio (the
allocator's median step time over PyTorch's in that file; repeats pooled per file),
and the script prints per loop how many files, the median ratio, how many were over
1.00, the lowest and highest, and a sign test: the chance of at least that many files
over 1.00 if the allocator made no difference (each file then over with probability
1/2; ties, exactly 1.00, left out). A loop over 1.00 in most files is slower for a
reason that one noisy run cannot show (nor hide); one whose sign test is not small is
not shown slower by these runs.

    python3 bench/workloads/time_spread.py [--allocator memkit] FILE.json...
"""
import argparse
import collections
import json
import math
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


def sign_test(ratios):
    """P(at least this many of the untied ratios over 1.00 | each over with p = 1/2)."""
    untied = [x for x in ratios if x != 1.0]
    over = sum(x > 1.0 for x in untied)
    n = len(untied)
    return sum(math.comb(n, k) for k in range(over, n + 1)) / 2.0**n if n else 1.0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--allocator", default="memkit", help="as named in the runs")
    parser.add_argument("files", nargs="+")
    args = parser.parse_args()
    found = ratios(args.files, args.allocator)
    print("| loop | files | median time / PyTorch's | over 1.00 | lowest | highest | sign test |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for loop in sorted(found, key=lambda k: -statistics.median(found[k])):
        r = found[loop]
        print("| %s | %d | %.3f | %d | %.3f | %.3f | %.3f |" % (
            loop, len(r), statistics.median(r), sum(x > 1.0 for x in r), min(r), max(r),
            sign_test(r)))


if __name__ == "__main__":
    main()
