#!/usr/bin/env python3
"""Whether one layout could hold every step of a loop whose shapes vary: the steps that
make the most common number of allocations are lined up by position (the k-th
allocation of each), each position gets the largest size it had in any of them (the
envelope), and the script prints

  - the highest peak of live bytes any of those steps reaches with its own sizes (the
    record) and with the envelope's, both counting only blocks the step allocated;
  - the height of a greedy plan of the envelope (largest first, each at the lowest
    offset clear of every position it overlapped in any of the steps).

A plan near the record would place every such step with no page moved and no more
memory than the record step needs; docs/BENCHMARKS.md has the suite's figures.

    python3 bench/workloads/step_envelope.py TRACE.trace.csv.gz...
"""
import collections
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import trace_lines  # noqa: E402

MIB = 1 << 20


def read_steps(path):
    """Per step (the events after each `s` line): its events, ("a", id, size) or ("f", id)."""
    steps = []
    live = set()
    for number, kind, line, fields in trace_lines.read(path, "step_envelope"):
        if kind == "s":
            steps.append([])
        elif kind == "a":
            if fields[1] in live:
                sys.exit("[step_envelope] %s:%d: block %s allocated twice" % (path, number, fields[1]))
            live.add(fields[1])
            if steps:
                steps[-1].append(("a", fields[1], int(fields[2])))
        elif kind == "f":
            if fields[1] not in live:
                sys.exit("[step_envelope] %s:%d: free of block %s, which is not live"
                         % (path, number, fields[1]))
            live.discard(fields[1])
            if steps:
                steps[-1].append(("f", fields[1]))
    return steps


def peak(step, sizes=None):
    """Peak of live bytes among the step's own blocks; sizes: per position, else its own."""
    live, highest, position, held = 0, 0, 0, {}
    for event in step:
        if event[0] == "a":
            held[event[1]] = sizes[position] if sizes else event[2]
            live += held[event[1]]
            highest = max(highest, live)
            position += 1
        elif event[1] in held:
            live -= held.pop(event[1])
    return highest


def greedy_height(steps, sizes):
    """Largest position first, at the lowest offset clear of every position it overlapped."""
    overlaps = [set() for _ in sizes]
    for step in steps:
        live, position = {}, 0
        for event in step:
            if event[0] == "a":
                for other in live.values():
                    overlaps[position].add(other)
                    overlaps[other].add(position)
                live[event[1]] = position
                position += 1
            else:
                live.pop(event[1], None)
    offsets = {}
    for p in sorted(range(len(sizes)), key=lambda p: -sizes[p]):
        taken = sorted((offsets[q], offsets[q] + sizes[q]) for q in overlaps[p] if q in offsets)
        offset = 0
        for low, high in taken:
            if offset + sizes[p] <= low:
                break
            offset = max(offset, high)
        offsets[p] = offset
    return max((offsets[p] + sizes[p] for p in offsets), default=0)


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    for path in sys.argv[1:]:
        steps = read_steps(path)
        counts = collections.Counter(sum(e[0] == "a" for e in step) for step in steps)
        if not counts:
            sys.exit("[step_envelope] %s: no step markers (`s` lines)" % path)
        n = counts.most_common(1)[0][0]
        same = [step for step in steps if sum(e[0] == "a" for e in step) == n]
        envelope = [0] * n
        for step in same:
            sizes = [e[2] for e in step if e[0] == "a"]
            envelope = [max(a, b) for a, b in zip(envelope, sizes)]
        record = max(peak(step) for step in same)
        enveloped = max(peak(step, envelope) for step in same)
        height = greedy_height(same, envelope)
        print("%s: %d of %d steps make %d allocations; record %.1f MiB, envelope %.1f MiB "
              "(%.3f x), greedy plan of the envelope %.1f MiB (%.3f x the record)"
              % (os.path.basename(path), len(same), len(steps), n, record / MIB,
                 enveloped / MIB, enveloped / max(record, 1), height / MIB,
                 height / max(record, 1)))


if __name__ == "__main__":
    main()
