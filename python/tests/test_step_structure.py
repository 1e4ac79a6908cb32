"""bench/workloads/step_structure.py: steps with the same large requests in the same
order share a structure whatever their sizes; the envelope's peak equals the largest
step's where that step is the largest at every request, and exceeds it where not."""
import gzip

import bench_scripts

step_structure = bench_scripts.load("step_structure")

MIB = 1 << 20


def write(path, steps):
    lines = ["# warmup_steps: 1", "s", "a,0,4096,0", "f,0"]  # the warm-up step
    block = 1
    for sizes in steps:
        lines.append("s")
        ids = []
        for size in sizes:
            lines.append("a,%d,%d,0" % (block, size))
            lines.append("a,%d,100,0" % (block + 1))  # small: not in the structure
            ids.append(block)
            block += 2
        lines += ["f,%d" % i for i in ids]
    with gzip.open(path, "wt") as f:
        f.write("\n".join(lines) + "\n")


def test_scaled_steps_share_a_structure_and_their_envelope(tmp_path):
    path = tmp_path / "t.trace.csv.gz"
    write(path, [[2 * MIB, 4 * MIB], [3 * MIB, 6 * MIB], [1 * MIB, 2 * MIB, 8 * MIB]])
    r = step_structure.analyse(str(path))
    assert r["steps"] == 3 and r["structures"] == 2 and r["covered"] == 2
    assert r["requests"] == 2
    assert r["envelope_peak"] == r["largest_peak"] == 9 * MIB


def test_an_envelope_above_every_step_when_no_step_is_largest_everywhere(tmp_path):
    path = tmp_path / "t.trace.csv.gz"
    write(path, [[2 * MIB, 6 * MIB], [5 * MIB, 3 * MIB]])
    r = step_structure.analyse(str(path))
    assert r["structures"] == 1 and r["covered"] == 2
    assert r["largest_peak"] == 8 * MIB and r["envelope_peak"] == 11 * MIB


def test_pad_envelope_makes_the_steps_of_a_structure_ask_the_same_sizes(tmp_path):
    pad_envelope = bench_scripts.load("pad_envelope")
    src, dst = tmp_path / "in.trace.csv.gz", tmp_path / "out.trace.csv.gz"
    write(src, [[2 * MIB, 6 * MIB], [5 * MIB, 3 * MIB], [1 * MIB, 2 * MIB, 8 * MIB]])
    pad_envelope.pad(str(src), str(dst))
    steps = step_structure.read_steps(str(dst))
    sizes = [[e[2] for e in step if e[0] == "a"] for step in steps]
    assert sizes[0] == sizes[1] == [5 * MIB, 100, 6 * MIB, 100]  # small requests unchanged
    assert sizes[2] == [1 * MIB, 100, 2 * MIB, 100, 8 * MIB, 100]  # alone in its structure
