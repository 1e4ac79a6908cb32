"""bench/workloads/shape_runs.py: each recurring shape's step copied ahead of the drawn
order, frees resolved against the step written before, checked line by line."""
import gzip

import bench_scripts

shape_runs = bench_scripts.load("shape_runs")


def write(path, lines):
    with gzip.open(path, "wt") as f:
        f.write("\n".join(lines) + "\n")


def steps_of(tmp_path, lines):
    path = tmp_path / "t.trace.csv.gz"
    write(path, lines)
    return shape_runs.read_steps(str(path))


# A weight, then steps of shape A (8 bytes) or B (9 bytes); each step frees the block
# the step before it made, as a loss handed on would be.
TRACE = ["# workload: drawn", "# steps: 7", "a,100,4,0",
         "s", "a,1,8,0",
         "s", "f,1", "a,2,9,0",
         "s", "f,2", "a,3,8,0",
         "s", "f,3", "a,4,9,0",
         "s", "f,4", "a,5,8,0",
         "s", "f,5", "a,6,9,0",
         "s", "f,6", "a,7,8,0"]


def test_no_runs_gives_the_trace_back_renumbered(tmp_path):
    header, steps = steps_of(tmp_path, TRACE)
    order = list(range(len(steps)))
    lines = shape_runs.write_lines(header, steps, order, 10)
    assert lines == ["# workload: drawn", "# steps: 7", "# warmup_steps: 10", "a,1,4,0",
                     "s", "a,2,8,0", "s", "f,2", "a,3,9,0", "s", "f,3", "a,4,8,0",
                     "s", "f,4", "a,5,9,0", "s", "f,5", "a,6,8,0", "s", "f,6", "a,7,9,0",
                     "s", "f,7", "a,8,8,0"]


def test_each_shape_runs_first_and_copies_free_what_the_step_before_made(tmp_path):
    header, steps = steps_of(tmp_path, TRACE)
    shapes = shape_runs.recurring_shapes(steps)
    assert shapes == [4, 5]  # second occurrences of B (steps 2, 4, 6) and A (3, 5, 7)
    order = [0, 1] + [k for k in shapes for _ in range(2)] + list(range(2, len(steps)))
    lines = shape_runs.write_lines(header, steps, order, 14)
    assert lines[:18] == ["# workload: drawn", "# steps: 11", "# warmup_steps: 14", "a,1,4,0",
                          "s", "a,2,8,0",  # the first step
                          "s", "f,2", "a,3,9,0", "s", "f,3", "a,4,9,0",  # B twice
                          "s", "f,4", "a,5,8,0", "s", "f,5", "a,6,8,0"]  # A twice
    # Every block made is freed at most once, and only after it was made.
    made, freed = set(), set()
    for line in lines:
        kind, _, rest = line.partition(",")
        block = rest.split(",")[0]
        if kind == "a":
            made.add(block)
        elif kind == "f":
            assert block in made and block not in freed
            freed.add(block)


def test_a_free_of_a_block_never_allocated_names_the_file_and_line(tmp_path):
    path = tmp_path / "bad.trace.csv.gz"
    write(path, ["a,1,8,0", "s", "f,2"])
    try:
        shape_runs.read_steps(str(path))
    except SystemExit as stop:
        assert str(stop) == "[shape_runs] %s:3: free of block 2, never allocated" % path
    else:
        raise AssertionError("a free of an unknown block was read")
