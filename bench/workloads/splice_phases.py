#!/usr/bin/env python3
"""Traces of a training loop with an eval phase between its training phases, made
from two traces of the suite: both traces' events before their first step marker
(weights, optimizer state), then TRAIN steps of the first and EVAL steps of the
second in turn, 35 steps in all. A block live across a phase's end stays live until
its own trace goes on (an eval result kept while training runs, say). Block ids of
the second trace are offset so that the two never meet.

    bench/workloads/splice_phases.py OUTDIR [--memkit build/memkit] [--pairs A+B ...]
        [--phases 4/2 8/3 1/1]

writes OUTDIR/A-B-TRAIN-EVAL.trace.csv.gz for each pair and phase pattern; with
--memkit, replays each with the library's defaults at `--device-lag` 0 and 2000 and
prints a Markdown table (reserved / live, unmaps a step after the 10 warm-up steps)
and how many meet the issue's goal (at most 1.02 and 5 unmaps a step at both lags).
"""
import argparse
import gzip
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import trace_lines  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PAIRS = [
    "resnet50_sgd+resnet18_eval_varbatch", "gpt2_train_adamw+gpt2_generate",
    "llama_train_varlen+llama_generate_varbatch", "t5_train_adamw+t5_generate_varlen",
    "bert_mlm_train_varlen+bert_infer_varlen", "convnext_tiny_adamw+resnet18_eval_varbatch",
    "swin_tiny_adamw_bf16+vit_eval_varbatch", "vit_b16_adamw_bf16+vit_eval_varbatch",
    "gpt2_compile_train+gpt2_beam_search", "unet_bf16+unet_sampling_varbatch",
]
STEPS = 35
WARMUP = 10
ID_OFFSET = 10**9


def read_steps(path):
    """The lines before the first step marker, and each step's lines."""
    before, steps = [], []
    current = before
    for _, kind, line, _ in trace_lines.read(path, "splice_phases"):
        if kind in ("#", "@"):
            continue
        if kind == "s":
            steps.append([])
            current = steps[-1]
        else:
            current.append(line)
    if not steps:
        sys.exit("[splice_phases] %s: no step marker" % path)
    return before, steps


def offset_ids(lines, offset):
    out = []
    for line in lines:
        fields = line.split(",")
        fields[1] = str(int(fields[1]) + offset)
        out.append(",".join(fields))
    return out


def splice(train, evaluate, train_steps, eval_steps, steps=STEPS):
    """The spliced trace's lines; train and evaluate as read_steps returns them."""
    train_before, train_loop = train
    eval_before = offset_ids(evaluate[0], ID_OFFSET)
    eval_loop = [offset_ids(s, ID_OFFSET) for s in evaluate[1]]
    lines = ["# steps: %d" % steps, "# warmup_steps: %d" % WARMUP]
    lines += train_before + eval_before
    done, next_step = 0, [0, 0]
    while done < steps:
        for source, count in ((0, train_steps), (1, eval_steps)):
            loop = (train_loop, eval_loop)[source]
            for _ in range(count):
                if done == steps:
                    break
                lines.append("s")
                if next_step[source] < len(loop):  # past its last step: an empty step
                    lines += loop[next_step[source]]
                next_step[source] += 1
                done += 1
    return lines


def replay(memkit, path, lag):
    out = subprocess.run([memkit, "replay", "--json", "--device-lag", str(lag), path],
                         capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit("[splice_phases] %s --device-lag %d failed:\n%s" % (path, lag, out.stderr))
    result = json.loads(out.stdout)
    return result["reserved_over_live"], result["unmaps_after_warmup_per_step"]


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("outdir")
    parser.add_argument("--memkit", help="replay each spliced trace with this memkit command")
    parser.add_argument("--pairs", nargs="+", default=PAIRS, metavar="TRAIN+EVAL")
    parser.add_argument("--phases", nargs="+", default=["4/2", "8/3", "1/1"], metavar="T/E")
    args = parser.parse_args()
    os.makedirs(args.outdir, exist_ok=True)
    made = []
    for pair in args.pairs:
        names = pair.split("+")
        if len(names) != 2:
            sys.exit("[splice_phases] --pairs: %r is not TRAIN+EVAL" % pair)
        traces = [read_steps(os.path.join(ROOT, "data/traces/workloads/%s.trace.csv.gz" % n))
                  for n in names]
        for phases in args.phases:
            train_steps, eval_steps = (int(x) for x in phases.split("/"))
            path = os.path.join(args.outdir, "%s-%s-%d-%d.trace.csv.gz" %
                                (names[0], names[1], train_steps, eval_steps))
            with gzip.open(path, "wt") as f:
                f.write("\n".join(splice(traces[0], traces[1], train_steps, eval_steps)) + "\n")
            made.append((pair, phases, path))
    if not args.memkit:
        for _, _, path in made:
            print(path)
        return
    print("| train + eval | phases | lag 0: reserved / live, unmaps a step | lag 2000 |")
    print("| --- | --- | ---: | ---: |")
    meets, unmaps = 0, 0.0
    for pair, phases, path in made:
        cells, ok = [], True
        for lag in (0, 2000):
            ratio, per_step = replay(args.memkit, path, lag)
            unmaps += per_step
            ok = ok and ratio <= 1.02 and per_step <= 5
            cells.append("%.3f, %.1f" % (ratio, per_step))
        meets += ok
        print("| %s | %s | %s |" % (pair, phases, " | ".join(cells)))
    print("\n%d of %d meet the goal; unmaps a step summed over both lags: %.1f"
          % (meets, len(made), unmaps))


if __name__ == "__main__":
    main()
