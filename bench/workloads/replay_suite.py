#!/usr/bin/env python3
"""Replays every trace of the workload suite (data/traces/workloads/) through
`memkit replay --json` with the allocator's defaults and with each extra setting
given, and prints a Markdown table: peak reserved / peak live, unmaps per step over
the whole trace, and unmaps per step after the trace's warm-up steps.

    bench/workloads/replay_suite.py build/memkit [--traces T...] \
        [--setting NAME='--flag value ...']...

Default settings: `default` (no flags), `no plan` (--plan-loops false), `floor`
(--arena-slack 0), `lag 2000` (--device-lag 2000).
"""
import argparse
import glob
import json
import os
import shlex
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SETTINGS = [("default", ""), ("no plan", "--plan-loops false"), ("floor", "--arena-slack 0"),
            ("lag 2000", "--device-lag 2000")]


def replay(memkit, trace, flags):
    out = subprocess.run([memkit, "replay", "--json"] + shlex.split(flags) + [trace],
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit("[replay_suite] %s %s failed:\n%s" % (trace, flags, out.stderr))
    return json.loads(out.stdout)


def suite_parser(description):
    """A parser of the memkit command and --traces (default: every trace of the suite)."""
    parser = argparse.ArgumentParser(description=description,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("memkit", help="path of the memkit command")
    parser.add_argument("--traces", nargs="+",
                        default=sorted(glob.glob(os.path.join(ROOT, "data/traces/workloads/*.gz"))))
    return parser


def parse_with_flags(parser, argv=None):
    """parser's arguments, with `.flags`: the words after `--`, for every replay (split off
    first: argparse would take them for options, or refuse them after --traces)."""
    argv = sys.argv[1:] if argv is None else argv
    cut = argv.index("--") if "--" in argv else len(argv)
    args = parser.parse_args(argv[:cut])
    args.flags = argv[cut + 1:]
    return args


def main():
    parser = suite_parser(__doc__)
    parser.add_argument("--setting", action="append", metavar="NAME=FLAGS",
                        help="a column: its name and the flags replay gets")
    args = parser.parse_args()
    settings = SETTINGS
    if args.setting:
        settings = [tuple(s.split("=", 1)) if "=" in s else (s, "") for s in args.setting]
    print("| trace | " + " | ".join("%s: reserved / live, unmaps a step (after warm-up)" % name
                                    for name, _ in settings) + " |")
    print("| --- |" + " ---: |" * len(settings))
    for trace in args.traces:
        cells = []
        for _, flags in settings:
            d = replay(args.memkit, trace, flags)
            after = d.get("unmaps_after_warmup_per_step")
            cells.append("%.3f, %.1f (%s)" % (d["reserved_over_live"], d.get("unmaps_per_step", -1),
                                              "-" if after is None else "%.1f" % after))
        name = os.path.basename(trace).split(".")[0]
        print("| %s | %s |" % (name, " | ".join(cells)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
