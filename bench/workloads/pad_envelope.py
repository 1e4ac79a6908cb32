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
import trace_lines  # noqa: E402


def large_sizes(lines, step):
    """The line numbers and sizes of a step's large requests, in order."""
    return [(i, int(lines[i][2][2])) for i in step
            if lines[i][0] == "a" and int(lines[i][2][2]) > step_structure.LARGE]


def pad(src, dst):
    lines = [(kind, line, f) for _, kind, line, f in trace_lines.read(src, "pad_envelope")]
    warmup = next((int(line.split(":")[1]) for kind, line, _ in lines
                   if kind == "#" and line.startswith("# warmup_steps:")), 10)
    steps = []  # each step's line numbers of its requests and frees
    for i, (kind, _, _) in enumerate(lines):
        if kind == "s":
            steps.append([])
        elif steps and kind in "af":
            steps[-1].append(i)
    structure = {}
    groups = collections.defaultdict(list)
    for k in range(warmup, len(steps)):
        events = [("a", f[1], int(f[2]), f[3] if len(f) > 3 and not f[3].startswith("@")
                   else "0") if kind == "a" else ("f", f[1])
                  for kind, _, f in (lines[i] for i in steps[k])]
        structure[k] = step_structure.structure(step_structure.large_only(events))
        groups[structure[k]].append(k)
    envelope = {}
    for shape, members in groups.items():
        sizes = [0] * sum(1 for e in shape if e[0] == "a")
        for k in members:
            for j, (_, size) in enumerate(large_sizes(lines, steps[k])):
                sizes[j] = max(sizes[j], size)
        envelope[shape] = sizes
    out = [line for _, line, _ in lines]
    for k in structure:
        for (i, _), size in zip(large_sizes(lines, steps[k]), envelope[structure[k]]):
            fields = list(lines[i][2])
            fields[2] = str(size)
            out[i] = ",".join(fields)
    with gzip.open(dst, "wt") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: pad_envelope.py IN.trace.csv.gz OUT.trace.csv.gz")
    pad(sys.argv[1], sys.argv[2])
