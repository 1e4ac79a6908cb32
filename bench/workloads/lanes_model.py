#!/usr/bin/env python3
"""A page-level model of one placement idea for loops whose large blocks change size
every step: each block of at least H pages gets a lane of its own (a virtual range
nothing else uses), reuses the free lane whose mapped prefix fits it best, maps only
what it lacks, and takes idle pages from other lanes (least recently used) past the
slack. Smaller blocks are taken as perfectly packed. Prints the model's unmaps a step
over the run and after the 10 warm-up steps, and the lanes made.

    python3 bench/workloads/lanes_model.py data/traces/workloads/lstm_lm_varlen.trace.csv.gz

A model, not the allocator: it says whether the idea is worth building.
"""
import gzip
import math
import sys

PAGE = 2 << 20


def run(path, huge_pages, slack=0.02):
    live, lane_of, lanes = {}, {}, []
    live_total = peak = small = 0
    by_step, step, unmaps, clock = [], -1, 0, 0
    for line in gzip.open(path, "rt"):
        line = line.strip()
        if line == "s":
            if step >= 0:
                by_step.append(unmaps)
            unmaps, step = 0, step + 1
            continue
        p = line.split(",")
        if p[0] == "a":
            block, size = p[1], int(p[2])
            clock += 1
            live[block] = size
            live_total += size
            peak = max(peak, live_total)
            n = (size + PAGE - 1) // PAGE
            if n < huge_pages:
                small += size
                continue
            free = [x for x in lanes if x["block"] is None]
            fits = [x for x in free if x["mapped"] >= n]
            if fits:
                lane = min(fits, key=lambda x: x["mapped"])
            elif free:
                lane = max(free, key=lambda x: x["mapped"])
            else:
                lane = {"mapped": 0, "block": None, "pages": 0, "used": 0}
                lanes.append(lane)
            need = max(0, n - lane["mapped"])
            mapped = sum(x["mapped"] for x in lanes) + math.ceil(small / PAGE)
            steal = max(0, need - max(0, int((1 + slack) * peak / PAGE) - mapped))
            for donor in sorted((x for x in lanes if x is not lane), key=lambda x: x["used"]):
                if steal == 0:
                    break
                take = min(donor["mapped"] - (donor["pages"] if donor["block"] else 0), steal)
                donor["mapped"] -= take
                steal -= take
                unmaps += take
            lane.update(mapped=max(lane["mapped"], n), block=block, pages=n, used=clock)
            lane_of[block] = lane
        elif p[0] == "f" and p[1] in live:
            size = live.pop(p[1])
            live_total -= size
            clock += 1
            if p[1] in lane_of:
                lane_of.pop(p[1]).update(block=None, pages=0, used=clock)
            else:
                small -= size
    by_step.append(unmaps)
    after = by_step[10:]
    return sum(by_step) / len(by_step), sum(after) / max(1, len(after)), len(lanes)


if __name__ == "__main__":
    for trace in sys.argv[1:]:
        for huge in (8, 32, 128):
            over_run, after, made = run(trace, huge)
            print("%s H=%d: %.1f unmaps a step (%.1f after warm-up), %d lanes" %
                  (trace.split("/")[-1].split(".")[0], huge, over_run, after, made))
