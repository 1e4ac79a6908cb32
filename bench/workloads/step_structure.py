#!/usr/bin/env python3
"""Whether a loop whose sizes change every step repeats its structure: for each trace,
the steps after its warm-up reduced to their large requests (above 512 KiB, the arena's;
each free named by the position of the allocation it frees in the step, or as one of an
earlier step's), the number of distinct structures among them, how many steps the
commonest covers, and that group's envelope: each request at the largest size it has in
any step of the group, its peak of bytes live (requests of the step only) over the
largest step's own peak. An envelope at 1.0 means the largest step is the largest at
every request: a layout made for it holds every step of its structure at the same
places.

    bench/workloads/step_structure.py [TRACE...]   (default: data/traces/workloads/*)
"""
import argparse
import collections
import glob
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import trace_lines  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LARGE = 512 << 10  # the small pool's largest request beside an arena


def read_trace(path):
    """The trace's records (kind, line, fields, as trace_lines reads them) and its steps
    after the warm-up, each a list of ('a', id, size, stream, record) and ('f', id,
    record), record being the event's index in the records."""
    records, steps, warmup = [], [], 10
    for _, kind, line, f in trace_lines.read(path, "step_structure"):
        records.append((kind, line, f))
        if kind == "#" and line.startswith("# warmup_steps:"):
            warmup = int(line.split(":")[1])
        elif kind == "s":
            steps.append([])
        elif kind == "a" and steps:
            stream = f[3] if len(f) > 3 and not f[3].startswith("@") else "0"
            steps[-1].append(("a", f[1], int(f[2]), stream, len(records) - 1))
        elif kind == "f" and steps:
            steps[-1].append(("f", f[1], len(records) - 1))
    return records, steps[warmup:]


def read_steps(path):
    """The steps after the warm-up (read_trace)."""
    return read_trace(path)[1]


def large_only(step):
    large, out = set(), []
    for e in step:
        if e[0] == "a" and e[2] > LARGE:
            large.add(e[1])
            out.append(e)
        elif e[0] == "f" and e[1] in large:
            out.append(e)
    return out


def structure(step):
    position, out = {}, []
    for e in step:
        if e[0] == "a":
            position[e[1]] = len(position)
            out.append(("a", e[3]))
        else:
            out.append(("f", position.get(e[1], "earlier")))
    return tuple(out)


def peak_live(step, sizes=None):
    """The peak of bytes live among the step's own requests; `sizes` replaces the k-th
    request's size."""
    live, peak, held, k = 0, 0, {}, 0
    for e in step:
        if e[0] == "a":
            size = sizes[k] if sizes else e[2]
            k += 1
            held[e[1]] = size
            live += size
            peak = max(peak, live)
        elif e[1] in held:
            live -= held.pop(e[1])
    return peak


def envelope(group):
    """Each request's largest size over steps of one structure (their large requests)."""
    sizes = [0] * sum(1 for e in group[0] if e[0] == "a")
    for step in group:
        for k, size in enumerate(e[2] for e in step if e[0] == "a"):
            sizes[k] = max(sizes[k], size)
    return sizes


def analyse(path):
    steps = [large_only(s) for s in read_steps(path)]
    if not steps:
        return None
    structures = [structure(s) for s in steps]
    counts = collections.Counter(structures)
    commonest, covered = counts.most_common(1)[0]
    group = [s for s, st in zip(steps, structures) if st == commonest]
    sizes = envelope(group)
    largest = max(peak_live(s) for s in group)
    return {"steps": len(steps), "structures": len(counts), "covered": covered,
            "requests": len(sizes), "envelope_peak": peak_live(group[0], sizes),
            "largest_peak": largest}


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("traces", nargs="*")
    args = parser.parse_args()
    traces = args.traces or sorted(glob.glob(os.path.join(ROOT, "data", "traces", "workloads",
                                                          "*.trace.csv.gz")))
    print("| trace | steps | structures | the commonest covers | its large requests | "
          "envelope peak / largest step's peak |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for path in traces:
        r = analyse(path)
        name = os.path.basename(path).split(".")[0]
        if r is None:
            print("| %s | 0 | | | | |" % name)
            continue
        ratio = r["envelope_peak"] / r["largest_peak"] if r["largest_peak"] else 1.0
        print("| %s | %d | %d | %d | %d | %.4f |" % (name, r["steps"], r["structures"],
                                                     r["covered"], r["requests"], ratio))
    return 0


if __name__ == "__main__":
    sys.exit(main())
