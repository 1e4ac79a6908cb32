"""bench/workloads/call_cost.py: the events it replays through PyTorch are the trace's
steps after the warm-up, as many as asked, without the frees of blocks made before
them (those tensors do not exist in the replay)."""
import gzip

import bench_scripts

call_cost = bench_scripts.load("call_cost")


def test_events_are_the_steps_after_the_warmup(tmp_path):
    path = tmp_path / "t.trace.csv.gz"
    lines = ["# warmup_steps: 1",
             "s", "a,0,100,0", "a,1,200,0", "f,0",  # warm-up: block 1 lives on
             "s", "a,2,300,0", "f,1", "f,2", "a,3,400,0",
             "s", "a,4,500,0", "f,3", "f,4",
             "s", "a,5,600,0", "f,5"]
    with gzip.open(path, "wt") as f:
        f.write("\n".join(lines) + "\n")
    assert call_cost.read_events(str(path), 2) == [
        (True, "2", 300), (False, "2", 0), (True, "3", 400),
        (True, "4", 500), (False, "3", 0), (False, "4", 0)]
    assert call_cost.read_events(str(path), 1) == [
        (True, "2", 300), (False, "2", 0), (True, "3", 400)]
