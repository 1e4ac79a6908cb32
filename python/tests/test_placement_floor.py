"""bench/workloads/placement_floor.py: the pages a placement rule needs, counted only
while a live block touches them, on a trace worked out by hand."""
import gzip

import bench_scripts

placement_floor = bench_scripts.load("placement_floor")

MIB = 1 << 20
PAGE = 2 * MIB


def write(path, lines):
    with gzip.open(path, "wt") as f:
        f.write("\n".join(lines) + "\n")


def test_best_fit_and_first_fit_pages_worked_by_hand(tmp_path):
    # 4, 1, 2.5 and 1 MiB packed from 0 (pages 0-4, 8.5 MiB live: the peak); the 4 and
    # 2.5 MiB blocks freed. 2.25 MiB: best fit takes the 2.5 MiB hole (pages 2-3),
    # first fit the 4 MiB one (pages 0-1); then 3.5 MiB: best fit the 4 MiB hole,
    # first fit above the last block (pages 4-5). A small request is not the arena's.
    path = tmp_path / "t.trace.csv.gz"
    write(path, ["s", "a,1,%d,0" % (4 * MIB), "a,2,%d,0" % MIB, "a,3,%d,0" % (5 * MIB // 2),
                 "a,4,%d,0" % MIB, "a,9,4096,0", "f,1", "f,3", "a,5,%d,0" % (9 * MIB // 4),
                 "a,6,%d,0" % (7 * MIB // 2),
                 "s", "a,7,%d,0" % (64 * MIB)])  # a second step: not read with steps=1
    assert placement_floor.floor(str(path), 1, "best", PAGE) == (17 * MIB // 2, 5 * PAGE)
    assert placement_floor.floor(str(path), 1, "first", PAGE) == (17 * MIB // 2, 6 * PAGE)
    live, pages = placement_floor.floor(str(path), 2, "best", PAGE)
    assert live == 17 * MIB // 4 + 7 * MIB // 2 + 64 * MIB and pages > 5 * PAGE


def test_blocks_of_whole_pages_freed_in_turn_need_no_more_than_live(tmp_path):
    path = tmp_path / "t.trace.csv.gz"
    lines = ["s"]
    for i in range(1, 40):
        lines.append("a,%d,%d,0" % (i, 2 * MIB))
        if i > 3:
            lines.append("f,%d" % (i - 3))
    write(path, lines)
    for rule in ("best", "first"):
        live, pages = placement_floor.floor(str(path), 1, rule, PAGE)
        assert live == 4 * PAGE and pages == live
