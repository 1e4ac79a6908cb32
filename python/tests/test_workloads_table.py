"""bench/workloads/workloads.py table: the compare table from compare's JSON files, with
the goals memkit's default misses; runs without a GPU or PyTorch."""
import json
import os
import subprocess
import sys

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "bench", "workloads",
                      "workloads.py")


def run(loop, allocator, steps_ms, reserved, allocated, unmaps=None):
    r = {"loop": loop, "allocator": allocator, "step_ms": sorted(steps_ms)[len(steps_ms) // 2],
         "step_times_ms": steps_ms, "peak_reserved": reserved, "peak_allocated": allocated}
    if unmaps is not None:
        r.update(maps_per_step=unmaps, unmaps_per_step=unmaps)
    return r


def table(tmp_path, *files, flags=()):
    paths = []
    for i, results in enumerate(files):
        path = tmp_path / ("compare%d.json" % i)
        path.write_text(json.dumps(results))
        paths.append(str(path))
    out = subprocess.run([sys.executable, SCRIPT, "table"] + list(flags) + ["--"] + paths,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    return {line.split(" | ")[0].strip("| "): line.rstrip(" |").split(" | ")
            for line in out.stdout.splitlines() if line.startswith("| ") and "---" not in line}


def test_rows_say_which_goals_memkit_misses(tmp_path):
    rows = table(tmp_path, [
        run("fast", "pytorch", [10.0, 10.0, 10.0], 130, 100),
        run("fast", "memkit", [9.0, 9.5, 9.0], 102, 100, unmaps=0.0),
        run("slow", "pytorch", [10.0, 10.0, 10.0], 130, 100),
        run("slow", "memkit", [11.0, 11.0, 11.0], 110, 100, unmaps=6.0),
    ])
    assert rows["fast"][-1] == "-"
    assert rows["fast"][3] == "0.900 (0.900)"  # median over PyTorch's, then paired
    assert rows["slow"][-1] == "time, memory, unmaps"
    assert rows["slow"][-2] == "6.0"
    assert rows["slow"][-3] == "1.100"  # mean step over PyTorch's mean step


def test_the_mean_step_shows_costly_steps_the_median_passes_over(tmp_path):
    # Three shapes; memkit's largest steps cost 40% more, the median step is equal.
    rows = table(tmp_path, [
        run("shapes", "pytorch", [10.0, 15.0, 20.0, 10.0, 15.0], 100, 100),
        run("shapes", "memkit", [10.0, 15.0, 28.0, 10.0, 15.0], 100, 100, unmaps=0.0),
    ])
    assert rows["shapes"][3] == "1.000 (1.000)"
    assert rows["shapes"][-3] == "1.114"
    assert rows["shapes"][-1] == "-"  # the goal is the median's


def test_time_is_missed_only_when_both_ratios_say_so(tmp_path):
    # The medians say 1.1, but step by step memkit is faster (the steps differ).
    rows = table(tmp_path, [
        run("mixed", "pytorch", [5.0, 10.0, 20.0], 100, 100),
        run("mixed", "memkit", [4.0, 11.0, 19.0], 100, 100, unmaps=0.0),
    ])
    assert rows["mixed"][3].startswith("1.100")
    assert rows["mixed"][-1] == "-"


def test_repeats_show_the_spread_of_run_ratios(tmp_path):
    # Two alternated repeats: run 1 over PyTorch's run 1 is 0.9, run 2 over run 2 is 1.2.
    rows = table(tmp_path, [
        run("r", "pytorch", [10.0], 100, 100), run("r", "memkit", [9.0], 100, 100, 0.0),
        run("r", "pytorch", [20.0], 100, 100), run("r", "memkit", [24.0], 100, 100, 0.0),
    ])
    assert rows["r"][3].endswith("[0.900-1.200]")
    single = table(tmp_path, [run("s", "pytorch", [10.0], 100, 100),
                              run("s", "memkit", [9.0], 100, 100, 0.0)])
    assert "[" not in single["s"][3]


def test_files_are_read_together_and_failed_runs_left_out(tmp_path):
    rows = table(tmp_path, [
        run("a", "pytorch", [10.0], 100, 100),
        {"loop": "a", "allocator": "memkit", "failed": True},
    ], [
        run("a", "memkit", [10.0], 103, 100, unmaps=1.0),
        run("a", "memkit:lib=base.so", [10.0], 101, 100, unmaps=9.0),
    ])
    # memkit's own run is the one judged and the one whose unmaps are shown.
    assert rows["a"][-2] == "1.0"
    assert rows["a"][-1] == "memory"


def test_latest_takes_each_loop_from_the_last_file_that_ran_it(tmp_path):
    older = [run("a", "pytorch", [10.0], 100, 100), run("a", "memkit", [12.0], 110, 100, 9.0),
             run("b", "pytorch", [10.0], 100, 100), run("b", "memkit", [9.0], 101, 100, 0.0)]
    newer = [run("a", "pytorch", [10.0], 100, 100), run("a", "memkit", [9.0], 101, 100, 1.0),
             run("c", "pytorch", [10.0], 100, 100)]
    rows = table(tmp_path, older, newer, flags=["--latest"])
    assert rows["a"][3] == "0.900 (0.900)" and rows["a"][-1] == "-"  # the newer run alone
    assert rows["b"][3] == "0.900 (0.900)"  # only the older file ran it
    assert rows["c"][3] == "-"  # never run under memkit: not a failure
    together = table(tmp_path, older, newer)
    assert together["a"][-2] == "5.0"  # without --latest both runs count
    only = table(tmp_path, older + [run("b", "expandable", [8.0], 100, 100)],
                 flags=["--allocators", "pytorch", "memkit"])
    # loop, two columns for each of two allocators, mean step, unmaps, goals
    assert len(only["b"]) == 8


def test_a_bad_file_is_named_with_what_is_wrong(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"loop": "a", "allocator": "memkit", "step_ms": 1.0}]))
    out = subprocess.run([sys.executable, SCRIPT, "table", str(bad)], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode != 0
    assert "bad.json: run 0 has no peak_reserved, peak_allocated" in out.stderr
    broken = tmp_path / "broken.json"
    broken.write_text("[{")
    out = subprocess.run([sys.executable, SCRIPT, "table", str(broken)], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode != 0 and "broken.json" in out.stderr


def test_compare_alternates_which_allocator_runs_first():
    import bench_scripts
    workloads = bench_scripts.load("workloads")
    both = ["pytorch", "memkit"]
    assert workloads.run_order(both, 1, 0) == ["pytorch", "memkit"]
    assert workloads.run_order(both, 1, 1) == ["memkit", "pytorch"]
    assert workloads.run_order(both, 2, 0) == ["pytorch", "memkit", "memkit", "pytorch"]
    assert workloads.run_order(both, 2, 3) == ["memkit", "pytorch", "pytorch", "memkit"]
    three = ["pytorch", "expandable", "memkit"]
    assert workloads.run_order(three, 1, 1) == ["memkit", "expandable", "pytorch"]
    # With an even count of repeats every allocator has each place equally often.
    for i in range(4):
        order = workloads.run_order(both, 2, i)
        assert sorted(order[0::2]) == sorted(both) and sorted(order[1::2]) == sorted(both)


def test_compare_pins_its_runs_to_the_cpus_given(tmp_path):
    import pytest
    import bench_scripts
    workloads = bench_scripts.load("workloads")
    mine = sorted(os.sched_getaffinity(0))
    assert workloads.parse_cpus("%d" % mine[0]) == [mine[0]]
    if len(mine) >= 2 and mine[1] == mine[0] + 1:
        assert workloads.parse_cpus("%d-%d" % (mine[0], mine[1])) == mine[:2]
    # Malformed on any machine (a range needs both ends), and a CPU no machine has.
    for bad in ("x", "3-", "0-", ",0", "-1", "", "100000"):
        with pytest.raises(SystemExit, match="--cpus"):
            workloads.parse_cpus(bad)
    # A child runs on the CPU given, and says so.
    script = "import os; print('RESULT [%d]' % sorted(os.sched_getaffinity(0))[0])"
    path = tmp_path / "child.py"
    path.write_text(script)
    result, error = workloads.run_child([], script=str(path), cpus=[mine[-1]])
    assert error is None and result == [mine[-1]]
