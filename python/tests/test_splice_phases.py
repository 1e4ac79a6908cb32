"""bench/workloads/splice_phases.py: a training trace and an eval trace in phases,
checked line by line on two small traces, and read back by memkit's own reader."""
import gzip
import json
import subprocess

import bench_scripts

splice_phases = bench_scripts.load("splice_phases")


def write(path, lines):
    with gzip.open(path, "wt") as f:
        f.write("\n".join(lines) + "\n")


def test_phases_take_turns_and_ids_never_meet(tmp_path):
    train = tmp_path / "train.trace.csv.gz"
    evaluate = tmp_path / "eval.trace.csv.gz"
    write(train, ["# workload: train", "a,1,4096,0", "s", "a,2,8192,0", "f,2", "s", "a,3,100,0",
                  "f,3", "s", "a,4,5,0", "f,4"])
    write(evaluate, ["a,1,7,0", "s", "a,2,9,0", "s", "f,2", "a,3,11,0", "f,3"])
    lines = splice_phases.splice(splice_phases.read_steps(str(train)),
                                 splice_phases.read_steps(str(evaluate)), 2, 1, steps=6)
    e = splice_phases.ID_OFFSET
    assert lines == [
        "# steps: 6", "# warmup_steps: 10", "a,1,4096,0", "a,%d,7,0" % (e + 1),
        "s", "a,2,8192,0", "f,2", "s", "a,3,100,0", "f,3",  # two training steps
        "s", "a,%d,9,0" % (e + 2),  # one eval step: its block outlives the phase
        "s", "a,4,5,0", "f,4", "s",  # the train trace's last step, then an empty one
        "s", "f,%d" % (e + 2), "a,%d,11,0" % (e + 3), "f,%d" % (e + 3)]


def test_a_spliced_suite_trace_replays(tmp_path, memkit_cli, monkeypatch):
    monkeypatch.setattr("sys.argv", [
        "splice_phases.py", str(tmp_path), "--pairs", "resnet50_sgd+resnet18_eval_varbatch",
        "--phases", "8/3"])
    splice_phases.main()
    path = tmp_path / "resnet50_sgd-resnet18_eval_varbatch-8-3.trace.csv.gz"
    run = subprocess.run([str(memkit_cli), "replay", "--json", str(path)], capture_output=True,
                         text=True, check=True)
    result = json.loads(run.stdout)
    assert result["completed"] and result["steps"] == 35 and result["warmup_steps"] == 10
