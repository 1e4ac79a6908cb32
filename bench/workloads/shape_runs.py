#!/usr/bin/env python3
"""A trace of a loop whose shape is drawn per step, with every shape first seen in a run
of its own: the steps before the first marker and the first step, then RUNS copies of
one step of each shape that recurs (three times or more), then the original steps
after the first, in order. So the loop plan meets each shape as a loop of its own
before the drawn order comes, and a replay shows what knowing every shape would give
the drawn steps (an upper bound on learning shapes, not a trace of a real program).

A copy frees what the step before it made, as the original step did: each free is
kept as (steps back, position among that step's allocations) and resolved against
the steps written; a free whose block was never made, or is gone, is dropped. With
RUNS 0 the output is the input with its ids renumbered.

    bench/workloads/shape_runs.py TRACE OUT [--runs 6]
"""
import argparse
import gzip
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import trace_lines  # noqa: E402


def read_steps(path):
    """The header lines, and the steps (the first: events before any marker); each
    step a list of its events: a line kept as it is (a marker, a call stack's frame),
    ("a", size, the fields after the id) or ("f", back, position)."""
    header, steps, made_at = [], [[]], {}
    made_in_step = 0  # allocations so far in the last step
    for number, kind, line, fields in trace_lines.read(path, "shape_runs"):
        step = steps[-1]
        if kind == "#":
            header.append(line)
        elif kind == "s":
            steps.append([line])
            made_in_step = 0
        elif kind == "a":
            made_at[fields[1]] = (len(steps) - 1, made_in_step)
            made_in_step += 1
            step.append(("a", fields[2], ",".join(fields[2:])))
        elif kind == "f":
            if fields[1] not in made_at:
                sys.exit("[shape_runs] %s:%d: free of block %s, never allocated"
                         % (path, number, fields[1]))
            made, position = made_at[fields[1]]
            step.append(("f", len(steps) - 1 - made, position))
        else:
            step.append(line)
    return header, steps


def recurring_shapes(steps):
    """For each shape (a step's allocation sizes) seen three times or more after the
    first step: its second occurrence (the first may follow a change of shape)."""
    seen = {}
    for k, step in enumerate(steps[2:], 2):
        key = tuple(e[1] for e in step if isinstance(e, tuple) and e[0] == "a")
        seen.setdefault(key, []).append(k)
    return [ks[1] for ks in seen.values() if len(ks) >= 3]


def write_lines(header, steps, order, warmup):
    lines = [h for h in header if not h.startswith(("# steps:", "# warmup_steps:"))]
    lines += ["# steps: %d" % (len(order) - 1), "# warmup_steps: %d" % warmup]
    written, live, next_id = [], set(), 1
    for w, k in enumerate(order):
        ids = []
        for e in steps[k]:
            if not isinstance(e, tuple):
                lines.append(e)
            elif e[0] == "a":
                lines.append("a,%d,%s" % (next_id, e[2]))
                ids.append(next_id)
                live.add(next_id)
                next_id += 1
            else:
                back, position = e[1], e[2]
                made = ids if back == 0 else written[w - back] if w >= back else []
                if position < len(made) and made[position] in live:
                    live.discard(made[position])
                    lines.append("f,%d" % made[position])
        written.append(ids)
    return lines


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace")
    parser.add_argument("out")
    parser.add_argument("--runs", type=int, default=6, help="copies of each shape's step")
    parser.add_argument("--warmup", type=int, default=10,
                        help="warm-up steps after the runs (the suite's 10)")
    args = parser.parse_args()
    header, steps = read_steps(args.trace)
    shapes = recurring_shapes(steps)
    order = [0, 1] + [k for k in shapes for _ in range(args.runs)] + list(range(2, len(steps)))
    lines = write_lines(header, steps, order, len(shapes) * args.runs + args.warmup)
    with gzip.open(args.out, "wt") as f:
        f.write("\n".join(lines) + "\n")
    print("%d shapes, %d steps" % (len(shapes), len(order) - 1))


if __name__ == "__main__":
    main()
