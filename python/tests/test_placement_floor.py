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


def test_partly_used_pages_share_a_physical_page_only_where_their_parts_do_not_overlap(tmp_path):
    # 3, 2 and 3 MiB from 0 (pages 0-3, whole); the 2 MiB block freed leaves page 1
    # with the first block's last MiB ([0, 1) MiB within it) and page 2 with the third
    # block's first ([1, 2)); a 4 MiB block then goes above (pages 4-5): 6 pages touched
    # for 10 MiB live, 5 when pages 1 and 2 share one. With the middle block 1.5 MiB
    # (the third from 4.5 MiB: [0.5, 2) on page 2) the parts overlap: no sharing.
    for middle, shared_pages in ((2 * MIB, 5), (3 * MIB // 2, 6)):
        path = tmp_path / ("t%d.trace.csv.gz" % middle)
        third = 8 * MIB - 3 * MIB - middle
        write(path, ["s", "a,1,%d,0" % (3 * MIB), "a,2,%d,0" % middle, "a,3,%d,0" % third,
                     "f,2", "a,4,%d,0" % (4 * MIB)])
        live = 3 * MIB + third + 4 * MIB
        for rule in ("best", "first"):
            assert placement_floor.floor(str(path), 1, rule, PAGE) == (max(live, 8 * MIB),
                                                                      6 * PAGE)
            assert placement_floor.floor(str(path), 1, rule, PAGE, share=True) == (
                max(live, 8 * MIB), shared_pages * PAGE)


def test_pages_paired_when_mapped_share_where_the_parts_are_free_then(tmp_path):
    # 3, 1, 3 and 1 MiB from 0 (pages 0-3, whole; 8 MiB live); the first 3 and the
    # last 1 MiB freed leave page 1 with [1, 2) of its physical page used and page 3
    # with [0, 1). A 4 MiB block above (from 7 MiB) takes page 3's free part, page 4
    # whole and [0, 1) of a new page 5: five pages touched for 8 MiB live, but page 5
    # maps page 1's physical page, whose [0, 1) is free: four physical pages.
    path = tmp_path / "t.trace.csv.gz"
    write(path, ["s", "a,1,%d,0" % (3 * MIB), "a,2,%d,0" % MIB, "a,3,%d,0" % (3 * MIB),
                 "a,4,%d,0" % MIB, "f,1", "f,4", "a,5,%d,0" % (4 * MIB)])
    assert placement_floor.floor(str(path), 1, "best", PAGE) == (8 * MIB, 5 * PAGE)
    assert placement_floor.floor(str(path), 1, "best", PAGE, pair_at_map=True) == (
        8 * MIB, 4 * PAGE)


def test_pages_paired_when_mapped_are_not_paired_again_later(tmp_path):
    # As in the sharing test above: the freed 2 MiB block leaves pages 1 and 2 each
    # half used, parts that do not overlap. Shared at every moment they need one
    # physical page; bound when first touched (page 2's part then overlapped page 1's
    # physical page's), they keep two.
    path = tmp_path / "t.trace.csv.gz"
    write(path, ["s", "a,1,%d,0" % (3 * MIB), "a,2,%d,0" % (2 * MIB), "a,3,%d,0" % (3 * MIB),
                 "f,2", "a,4,%d,0" % (4 * MIB)])
    assert placement_floor.floor(str(path), 1, "best", PAGE, share=True) == (10 * MIB, 5 * PAGE)
    assert placement_floor.floor(str(path), 1, "best", PAGE, pair_at_map=True) == (
        10 * MIB, 6 * PAGE)
