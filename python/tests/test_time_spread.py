"""bench/workloads/time_spread.py: one ratio per file and loop (repeats pooled), only
where both allocators ran; a file that is not a compare run names itself."""
import json
import os
import subprocess
import sys

import bench_scripts

time_spread = bench_scripts.load("time_spread")


def write(tmp_path, name, runs):
    path = tmp_path / name
    path.write_text(json.dumps(runs))
    return str(path)


def run(loop, allocator, step_ms):
    return {"loop": loop, "allocator": allocator, "step_ms": step_ms}


def test_one_ratio_per_file_and_loop(tmp_path):
    a = write(tmp_path, "a.json", [run("x", "pytorch", 10.0), run("x", "memkit", 11.0),
                                    run("x", "memkit", 13.0), run("y", "pytorch", 5.0)])
    b = write(tmp_path, "b.json", [run("x", "pytorch", 10.0), run("x", "memkit", 9.0),
                                    run("y", "memkit", 5.0)])
    found = time_spread.ratios([a, b])
    assert sorted(found) == ["x"]  # y never ran both in one file
    assert found["x"] == [1.2, 0.9]  # a: the median of 11 and 13 over 10


def test_a_file_that_is_not_a_compare_run_is_named(tmp_path):
    bad = write(tmp_path, "bad.json", {"loop": "x"})
    script = os.path.join(os.path.dirname(__file__), "..", "..", "bench", "workloads",
                          "time_spread.py")
    out = subprocess.run([sys.executable, script, bad], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode != 0
    assert "bad.json" in out.stderr and "[time_spread]" in out.stderr


def test_the_sign_test_counts_files_over_and_leaves_ties_out():
    # 3 of 3 over: 1/8; 2 of 3: (3 + 1) / 8; a tie is not a file of either side.
    assert time_spread.sign_test([1.1, 1.2, 1.05]) == 0.125
    assert time_spread.sign_test([1.1, 0.9, 1.05]) == 0.5
    assert time_spread.sign_test([1.1, 1.0, 1.2, 1.3]) == 0.125
    assert time_spread.sign_test([0.9, 0.8]) == 1.0
    assert time_spread.sign_test([]) == 1.0
