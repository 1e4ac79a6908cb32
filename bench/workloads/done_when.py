#!/usr/bin/env python3
"""Checks issue #22's replay "done when" on the suite's traces: `memkit replay T --json`
with no flags but the device lag, at lags 0 and 2000, gives reserved / live at most 1.02
and at most 5 unmaps a step after the trace's warm-up. Prints one row per trace (with,
at each lag, the device calls' modelled time a step), the count that meets both lags
and, summed over both lags, the unmaps a step and the device calls' modelled time a
step (the simulated device's per-call costs, from ../shared/device-costs.md: a change
that trades unmaps for maps shows there).

    bench/workloads/done_when.py build/memkit [--traces T...] [--jobs N] [-- FLAGS...]

FLAGS (after --) go to every replay, to measure a variant against the default.
"""
import concurrent.futures
import os
import sys

from replay_suite import parse_with_flags, replay, suite_parser

LAGS = (0, 2000)
MEMORY_GOAL = 1.02
UNMAPS_GOAL = 5.0


def measure(memkit, trace, lag, flags):
    d = replay(memkit, trace, " ".join(["--device-lag", str(lag)] + flags))
    after = d.get("unmaps_after_warmup_per_step")
    unmaps = d.get("unmaps_per_step", 0.0) if after is None else after
    return d["reserved_over_live"], unmaps, d.get("simulated_backend_ns_after_warmup_per_step", 0)


def main():
    parser = suite_parser(__doc__)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = parse_with_flags(parser)
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        runs = {(t, lag): pool.submit(measure, args.memkit, t, lag, args.flags)
                for t in args.traces for lag in LAGS}
        print("| trace | " + " | ".join("lag %d: reserved / live, unmaps a step, device ms a step"
                                        % lag for lag in LAGS) + " | meets |")
        print("| --- |" + " ---: |" * len(LAGS) + " --- |")
        met, unmaps, device_ns = 0, 0.0, 0
        for trace in args.traces:
            cells, ok = [], True
            for lag in LAGS:
                ratio, per_step, ns = runs[(trace, lag)].result()
                unmaps += per_step
                device_ns += ns
                ok = ok and ratio <= MEMORY_GOAL and per_step <= UNMAPS_GOAL
                cells.append("%.3f, %.1f, %.2f" % (ratio, per_step, ns / 1e6))
            met += ok
            name = os.path.basename(trace).split(".")[0]
            print("| %s | %s | %s |" % (name, " | ".join(cells), "yes" if ok else "no"), flush=True)
    print("\n%d of %d traces meet the goal at both lags; summed: unmaps a step %.1f, "
          "device calls %.2f ms a step (modelled)" % (met, len(args.traces), unmaps, device_ns / 1e6))
    return 0


if __name__ == "__main__":
    sys.exit(main())
