"""bench/workloads/long_run.py: the long run it writes from a trace is a valid trace of
the same loop (every free names a live block; a step's blocks outlive it into the next
step as they did), whose steps keep their order when all ask for the same sizes."""
import gzip
import json
import os
import subprocess

import bench_scripts

SCRIPT = bench_scripts.path("long_run")
long_run = bench_scripts.load("long_run")


def write_trace(path, steps, warmup=2):
    lines = ["# warmup_steps: %d" % warmup]
    for events in steps:
        lines.append("s")
        lines += events
    with gzip.open(path, "wt") as f:
        f.write("\n".join(lines) + "\n")


def loop_steps(sizes):
    # Each step frees the block the step before left (block 2k+1) after making its own.
    steps = []
    for k, size in enumerate(sizes):
        events = ["a,%d,%d,0" % (2 * k, size), "a,%d,4096,0" % (2 * k + 1)]
        if k > 0:
            events.append("f,%d" % (2 * k - 1))
        events.append("f,%d" % (2 * k))
        steps.append(events)
    return steps


def events_of(path):
    return [line for line in gzip.open(path, "rt").read().splitlines()
            if line and not line.startswith("#")]


def test_a_varying_loop_runs_long_and_replays(tmp_path, memkit_cli):
    src, out = tmp_path / "loop.csv.gz", tmp_path / "long.csv.gz"
    write_trace(src, loop_steps([1 << 20, 3 << 20, 5 << 20, 7 << 20, 9 << 20]))
    assert long_run.write_long(str(src), str(out), 40, seed=3) == 2
    events = events_of(out)
    assert events.count("s") == 40
    live = set()
    for e in events:
        f = e.split(",")
        if f[0] == "a":
            assert f[1] not in live
            live.add(f[1])
        elif f[0] == "f":
            assert f[1] in live, e
            live.discard(f[1])
    assert len(live) == 1  # the last step's small block, as in the trace
    r = subprocess.run([str(memkit_cli), "replay", "--json", str(out)], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["completed"] and len(d["unmaps_by_step"]) == 40
    # Drawn at random: the sizes after the warm-up do not come in the recorded order.
    big = [int(e.split(",")[2]) for e in events if e.startswith("a,") and ",4096," not in e]
    assert big[2:] != [[5 << 20, 7 << 20, 9 << 20][k % 3] for k in range(len(big) - 2)]


def test_a_fixed_loop_keeps_its_order(tmp_path):
    src, out = tmp_path / "loop.csv.gz", tmp_path / "long.csv.gz"
    write_trace(src, loop_steps([1 << 20] * 5))
    long_run.write_long(str(src), str(out), 12, seed=3)
    steps = []
    for e in events_of(out):
        if e == "s":
            steps.append([])
        else:
            steps[-1].append(e.split(","))
    assert len(steps) == 12
    for before, step in zip(steps[2:], steps[3:]):
        # a big block, a small one, the step before's small one freed, the big one freed:
        # in the recorded order, the step before's block freed where it was.
        assert [e[0] for e in step] == ["a", "a", "f", "f"]
        assert step[2][1] == before[1][1] and step[3][1] == step[0][1]
