#!/usr/bin/env python3
"""Makes a longer trace of an inference loop, in an order it was not recorded in: the
trace as recorded, then N more steps drawn with replacement (seeded) from its steps
that free everything they allocate (inference steps do; training steps keep
gradients and optimizer state across steps, and are refused). A drawn step's blocks
get new numbers. The output's warm-up is the recorded steps, so `memkit replay`'s
`unmaps_after_warmup_per_step` covers the drawn steps only: a check that a figure of
the suite does not hang on the order its recorded steps came in.

    python3 bench/workloads/draw_steps.py IN.trace.csv.gz OUT.trace.csv.gz N [SEED]
"""
import gzip
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import trace_lines  # noqa: E402


def read(path):
    """Metadata lines, the events before the first step, and the steps (lines)."""
    meta, prologue, steps = [], [], []
    current = prologue
    for _, kind, line, _ in trace_lines.read(path, "draw_steps"):
        if kind == "#":
            key = line[1:].split(":", 1)[0].strip()
            if key not in ("steps", "warmup_steps"):
                meta.append(line)
        elif kind == "s":
            current = []
            steps.append(current)
        else:
            current.append(line)
    return meta, prologue, steps


def is_self_contained(step):
    """Whether the step frees exactly the blocks it allocates."""
    live = set()
    for line in step:
        kind, block = line.split(",", 2)[:2]
        if kind == "a":
            live.add(block)
        elif kind == "f":
            if block not in live:
                return False
            live.discard(block)
    return not live


def main():
    if len(sys.argv) not in (4, 5):
        sys.exit(__doc__)
    source, target, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    seed = int(sys.argv[4]) if len(sys.argv) == 5 else 0
    meta, prologue, steps = read(source)
    pool = [s for s in steps if is_self_contained(s)]
    if not pool:
        sys.exit("[draw_steps] %s: no step frees everything it allocates (a training loop?)"
                 % source)
    rng = random.Random(seed)
    numbers = [int(line.split(",")[1]) for s in [prologue] + steps for line in s
               if line.startswith("a,")]
    next_number = max(numbers, default=0) + 1
    out = meta + ["# steps: %d" % (len(steps) + count), "# warmup_steps: %d" % len(steps)]
    out += prologue
    for s in steps:
        out.append("s")
        out += s
    for _ in range(count):
        renamed = {}
        out.append("s")
        for line in rng.choice(pool):
            if line.startswith("@"):
                continue  # a call stack's frame: defined once, above
            fields = line.split(",")
            if fields[0] == "a":
                renamed[fields[1]] = str(next_number)
                next_number += 1
            fields[1] = renamed.get(fields[1], fields[1])
            out.append(",".join(fields))
    with gzip.open(target, "wt") as f:
        f.write("\n".join(out) + "\n")
    print("%s: %d recorded steps, %d drawn from %d" % (target, len(steps), count, len(pool)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
