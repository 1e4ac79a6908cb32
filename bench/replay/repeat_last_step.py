#!/usr/bin/env python3
"""Makes a training trace longer, so that replays show its steady state: the
original events, then its last whole step again and again.

    python3 bench/replay/repeat_last_step.py IN.trace.csv.gz OUT.trace.csv.gz REPEATS [MIN_STEP]

A step ends where live bytes fall to their lowest (what stays live between steps:
weights, gradients, optimizer state). The last step runs from the latest such point
back to the one before it at least MIN_STEP events earlier (default 200; GPT-2's
optimizer step touches the low several times, 1500 finds its step). Blocks that a
step allocates and the next one frees (by size) are chained from copy to copy.
Input and output are memkit traces (docs/TRACES.md). The input's step markers (`s`
lines) and its `steps` / `warmup_steps` metadata are dropped: the repeated step is
found from live bytes, not from the markers, so the output's steps are not known.
"""
import argparse
import collections
import gzip
import sys


def read(path):
    meta, events = [], []
    with gzip.open(path, "rt") as f:
        for number, line in enumerate(f, 1):
            if line.startswith("#"):
                key = line[1:].split(":", 1)[0].strip()
                if key not in ("steps", "warmup_steps"):
                    meta.append(line)
                continue
            fields = line.strip().split(",")
            if fields == ["s"]:  # a step marker
                continue
            if fields[0] == "a" and len(fields) == 4:
                events.append(("a", fields[1], int(fields[2]), fields[3]))
            elif fields[0] == "f" and len(fields) == 2:
                events.append(("f", fields[1], 0, ""))
            else:
                sys.exit("[repeat_last_step] %s:%d: not a memkit trace event" % (path, number))
    return meta, events


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("source")
    parser.add_argument("output")
    parser.add_argument("repeats", type=int)
    parser.add_argument("min_step", type=int, nargs="?", default=200)
    args = parser.parse_args()
    meta, events = read(args.source)

    sizes, live, live_after = {}, 0, []
    for kind, block, size, _ in events:
        if kind == "a":
            sizes[block] = size
            live += size
        else:
            live -= sizes[block]
        live_after.append(live)
    first_third = len(live_after) // 3
    low = min(live_after[first_third:])
    lows = [j for j in range(first_third, len(live_after)) if live_after[j] == low]
    end = lows[-1]
    starts = [j for j in lows if j < end - args.min_step]
    if not starts:
        sys.exit("[repeat_last_step] %s: no whole step found; try a smaller MIN_STEP" % args.source)
    step = events[starts[-1] + 1:end + 1]

    allocated = {b for kind, b, _, _ in step if kind == "a"}
    freed = {b for kind, b, _, _ in step if kind == "f"}
    carried = [b for kind, b, _, _ in step if kind == "a" and b not in freed]
    inherited = [b for kind, b, _, _ in step if kind == "f" and b not in allocated]
    if sorted(sizes[b] for b in carried) != sorted(sizes[b] for b in inherited):
        sys.exit("[repeat_last_step] %s: the step does not hand on what it inherits" % args.source)
    by_size = collections.defaultdict(collections.deque)
    for b in carried:
        by_size[sizes[b]].append(b)
    carried = [by_size[sizes[b]].popleft() for b in inherited]  # carried[k] plays inherited[k]
    print("step: events %d..%d (%d), %d blocks handed on" %
          (starts[-1] + 2, end + 1, len(step), len(carried)), file=sys.stderr)

    with gzip.open(args.output, "wt") as out:
        for line in meta:
            out.write(line)
        out.write("# repeated: events %d..%d, %d more times\n" % (starts[-1] + 2, end + 1,
                                                                 args.repeats))
        for kind, block, size, stream in events:
            out.write("a,%s,%d,%s\n" % (block, size, stream) if kind == "a" else "f,%s\n" % block)
        plays = dict(zip(inherited, carried))  # an inherited id -> the id that plays it now
        next_id = max(int(b) for b in sizes) + 1
        for _ in range(args.repeats):
            renamed = {}
            for kind, block, size, stream in step:
                if kind == "a":
                    renamed[block] = str(next_id)
                    next_id += 1
                    out.write("a,%s,%d,%s\n" % (renamed[block], size, stream))
                else:
                    out.write("f,%s\n" % (renamed[block] if block in renamed else plays[block]))
            plays = {i: renamed[c] for i, c in zip(inherited, carried)}


if __name__ == "__main__":
    main()
