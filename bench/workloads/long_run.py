#!/usr/bin/env python3
"""Long runs of the workload suite's loops in replay: each trace's steps after its
warm-up are repeated in a random order (a loop whose shapes recur but never in a
fixed period) until the run has --steps steps, then replayed with `memkit replay
--json`, and the unmaps a step are printed over the first steps after the
warm-up (as the trace's own length gives) and over the run's last half (its steady
state), with the maps and the device calls' modelled time a step after the warm-up. A loop whose steps all ask for the same sizes repeats them in their recorded
order instead. A layout that defers its unmaps (leaves moved pages' old places mapped as
shadows, in fresh addresses) shows low figures early and its true rate late.

    bench/workloads/long_run.py build/memkit [--against OTHER] [--traces T...]
        [--steps 2000] [--seed 1] [--jobs 2] [-- FLAGS]

FLAGS after `--` go to every replay. The arena reserves 8 x the device's capacity in
addresses (`--capacity`, 1 TiB in replay unless given: pass the GPU's, e.g. `--
--capacity 141GiB`, or less to see a run outlast its addresses sooner). A trace's run
is cut at ~2M events (LONG_EVENTS), so a generate loop runs a few hundred steps.

The blocks a step leaves live are freed in the next step where that step frees the
blocks its own step before left (the same block, else one of the same size, else the
oldest), the rest at its end. (draw_steps.py draws an inference loop's steps, which
free all they make, after the recorded ones.)
"""
import argparse
import concurrent.futures
import glob
import gzip
import json
import os
import random
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import trace_lines  # noqa: E402
from replay_suite import parse_with_flags  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def read_steps(path):
    """The steps (events before the first marker count as one) and the warm-up's length."""
    steps, cur, warmup = [], [], 10
    for _, kind, line, f in trace_lines.read(path, 'long_run'):
        if kind == '#' and line.startswith('# warmup_steps:'):
            warmup = int(line.split(':')[1])
        elif kind == 's':
            if cur or steps:
                steps.append(cur)
            cur = []
        elif kind == 'a':
            stream = f[3] if len(f) > 3 and not f[3].startswith('@') else '0'
            cur.append(('a', int(f[1]), f[2], stream))
        elif kind == 'f':
            cur.append(('f', int(f[1])))
    steps.append(cur)
    return steps, warmup


def write_long(path, out, steps_wanted, seed):
    steps, warmup = read_steps(path)
    pre, body = steps[:warmup], steps[warmup:]
    rng = random.Random(seed)
    # A loop whose steps ask for the same sizes repeats its steps in their order.
    fixed = len({tuple(e[2] for e in s if e[0] == 'a') for s in body}) == 1
    # At most ~2M events (a generate loop's step has ~100k); at least the trace's length.
    per_step = sum(len(s) for s in body) / max(len(body), 1)
    events = float(os.environ.get('LONG_EVENTS', '2e6'))
    steps_wanted = max(len(steps), min(steps_wanted, warmup + int(events / max(per_step, 1))))
    lines = ['# warmup_steps: %d' % warmup]
    for s in pre:
        lines.append('s')
        lines += ['a,%d,%s,%s' % e[1:] if e[0] == 'a' else 'f,%d' % e[1] for e in s]
    sizes = {e[1]: e[2] for s in steps for e in s if e[0] == 'a'}
    # Ids of the warm-up's blocks stay below 1e9; each later step gets its own range.
    # carry: the blocks the step before left live, original id -> id in the run.
    carry, n = {}, 0
    if pre:  # the warm-up's last step's blocks still live
        freed = {e[1] for e in pre[-1] if e[0] == 'f'}
        carry = {e[1]: e[1] for e in pre[-1] if e[0] == 'a' and e[1] not in freed}
    while warmup + n < steps_wanted:
        s = body[n % len(body)] if fixed else body[rng.randrange(len(body))]
        key = (n + 1) * 10 ** 9
        lines.append('s')
        mine = {}
        for e in s:
            if e[0] == 'a':
                mine[e[1]] = e[1] + key
                lines.append('a,%d,%s,%s' % (e[1] + key, e[2], e[3]))
            elif e[1] in mine:
                lines.append('f,%d' % mine.pop(e[1]))
            elif carry:
                # The block of the step before: the same one (steps in order), else
                # one of the same size, else the oldest.
                orig = e[1] if e[1] in carry else next(
                    (o for o in carry if sizes[o] == sizes.get(e[1])), next(iter(carry)))
                lines.append('f,%d' % carry.pop(orig))
        lines += ['f,%d' % i for i in carry.values()]
        carry = mine
        n += 1
    with gzip.open(out, 'wt', compresslevel=1) as f:
        f.write('\n'.join(lines) + '\n')
    return warmup


def replay(memkit, trace, flags):
    out = subprocess.run([memkit, 'replay', '--json'] + flags + [trace], capture_output=True,
                         text=True)
    if out.returncode != 0:
        raise SystemExit('[long_run] %s failed:\n%s' % (trace, out.stderr))
    d = json.loads(out.stdout)
    return d[0] if isinstance(d, list) else d


def figures(d, warmup, early_steps):
    u = d['unmaps_by_step']
    early = u[warmup:early_steps]
    late = u[len(u) // 2:]
    return {'ratio': d['reserved_over_live'], 'early': sum(early) / max(len(early), 1),
            'late': sum(late) / max(len(late), 1), 'maps': d['maps_after_warmup_per_step'],
            'device_ms': d.get('simulated_backend_ns_after_warmup_per_step', 0) / 1e6}


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('memkit')
    p.add_argument('--against')
    p.add_argument('--traces', nargs='+')
    p.add_argument('--steps', type=int, default=2000)
    p.add_argument('--seed', type=int, default=1)
    p.add_argument('--jobs', type=int, default=2)
    a = parse_with_flags(p)
    traces = a.traces or sorted(
        glob.glob(os.path.join(ROOT, 'data/traces/workloads/*.trace.csv.gz')))
    builds = [a.memkit] + ([a.against] if a.against else [])
    with tempfile.TemporaryDirectory() as tmp:
        def one(trace):
            name = os.path.basename(trace).split('.')[0]
            long = os.path.join(tmp, name + '.csv.gz')
            warmup = write_long(trace, long, a.steps, a.seed)
            early_steps = len(replay(builds[0], trace, a.flags)['unmaps_by_step'])
            return name, [figures(replay(b, long, a.flags), warmup, early_steps) for b in builds]
        with concurrent.futures.ThreadPoolExecutor(a.jobs) as ex:
            rows = list(ex.map(one, traces))
    cols = ['reserved / live', 'unmaps a step, early', 'unmaps a step, last half', 'maps a step',
            'device calls ms a step']
    keys = ['ratio', 'early', 'late', 'maps', 'device_ms']
    head = ' | '.join(c + (': this | base' if a.against else '') for c in cols)
    print('| trace | ' + head + ' |')
    print('| --- |' + ' ---: |' * (len(cols) * len(builds)))
    sums = [[0.0] * len(keys) for _ in builds]
    for name, fs in rows:
        cells = []
        for k, key in enumerate(keys):
            for b, f in enumerate(fs):
                cells.append(('%.3f' if key == 'ratio' else '%.2f' if key == 'device_ms' else '%.1f')
                             % f[key])
                if key != 'ratio':
                    sums[b][k] += f[key]
        print('| %s | %s |' % (name, ' | '.join(cells)))
    for b, build in enumerate(builds):
        print('%s: sums: unmaps a step early %.1f, last half %.1f; maps a step %.1f; device calls '
              '%.2f ms a step (modelled)' % (build, sums[b][1], sums[b][2], sums[b][3], sums[b][4]))


if __name__ == '__main__':
    main()
