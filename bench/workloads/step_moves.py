#!/usr/bin/env python3
"""Where a trace's page moves are, step by step: each step's peak of live bytes, whether
it is the highest so far (a new peak) or within 3% below it, its largest block, and
the unmaps `memkit replay --json` counts in it (the library's defaults, or the flags
given). On the suite's loops of varying shapes the moves after the warm-up come in
the steps at or near a new peak.

    python3 bench/workloads/step_moves.py build/memkit TRACE.trace.csv.gz [-- FLAGS...]
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import trace_lines  # noqa: E402

MIB = 1 << 20


def read_steps(path):
    """Per step (the events after each `s` line): peak live bytes and largest block."""
    live = {}
    current = 0
    steps = []  # [peak, largest]
    for number, kind, line, fields in trace_lines.read(path, "step_moves"):
        if kind == "s":
            steps.append([current, 0])
        elif kind == "a":
            if fields[1] in live:
                sys.exit("[step_moves] %s:%d: block %s allocated twice" % (path, number, fields[1]))
            size = int(fields[2])
            live[fields[1]] = size
            current += size
            if steps:
                steps[-1][0] = max(steps[-1][0], current)
                steps[-1][1] = max(steps[-1][1], size)
        elif kind == "f":
            if fields[1] not in live:
                sys.exit("[step_moves] %s:%d: free of block %s, which is not live"
                         % (path, number, fields[1]))
            current -= live.pop(fields[1])
    return steps


def main():
    args = sys.argv[1:]
    flags = []
    if "--" in args:
        flags = args[args.index("--") + 1:]
        args = args[:args.index("--")]
    if len(args) != 2:
        sys.exit(__doc__)
    memkit, trace = args
    steps = read_steps(trace)
    if not steps:
        sys.exit("[step_moves] %s: no step markers (`s` lines)" % trace)
    out = subprocess.run([memkit, "replay", "--json"] + flags + [trace], capture_output=True,
                         text=True)
    if out.returncode != 0:
        sys.exit("[step_moves] memkit replay %s failed:\n%s" % (trace, out.stderr))
    result = json.loads(out.stdout)
    unmaps = result["unmaps_by_step"]
    if len(unmaps) != len(steps):
        sys.exit("[step_moves] %s: %d steps in the trace, %d in the replay"
                 % (trace, len(steps), len(unmaps)))
    print("| step | peak live (MiB) | | largest block (MiB) | unmaps |")
    print("| ---: | ---: | --- | ---: | ---: |")
    warmup = result.get("warmup_steps", 0)
    highest = 0
    after, near_peak = 0, 0
    for k, ((peak, largest), moved) in enumerate(zip(steps, unmaps)):
        mark = "new peak" if peak > highest else ("within 3%" if peak >= 0.97 * highest else "")
        highest = max(highest, peak)
        print("| %d | %d | %s | %d | %d |" % (k, peak // MIB, mark, largest // MIB, moved))
        if k >= warmup:
            after += moved
            near_peak += moved if mark else 0
    timed = max(len(steps) - warmup, 1)
    print("\nafter the warm-up (steps %d-%d): %.1f unmaps a step, %d of %d in steps at or "
          "within 3%% of a new peak" % (warmup, len(steps) - 1, after / timed, near_peak, after))

if __name__ == "__main__":
    main()
