#!/usr/bin/env python3
"""An oracle for envelope plans: rewrites a trace so that every step after the warm-up
asks, at each of its large requests, the largest size that request has in any step of
its structure (step_structure.py's envelope, taken from the whole trace); small requests
and the warm-up stay as they were. Replayed, the steps of one structure repeat exactly,
as the loop plan learns loops; compare `memkit replay --json` of the result with the
original's peak live.

    bench/workloads/pad_envelope.py IN.trace.csv.gz OUT.trace.csv.gz
"""
import collections
import gzip
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import step_structure  # noqa: E402


def pad(src, dst):
    records, steps = step_structure.read_trace(src)
    large = [step_structure.large_only(step) for step in steps]
    groups = collections.defaultdict(list)
    for step in large:
        groups[step_structure.structure(step)].append(step)
    out = [line for _, line, _ in records]
    for group in groups.values():
        sizes = step_structure.envelope(group)
        for step in group:
            for e, size in zip((e for e in step if e[0] == "a"), sizes):
                fields = list(records[e[4]][2])
                fields[2] = str(size)
                out[e[4]] = ",".join(fields)
    with gzip.open(dst, "wt") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: pad_envelope.py IN.trace.csv.gz OUT.trace.csv.gz")
    pad(sys.argv[1], sys.argv[2])
