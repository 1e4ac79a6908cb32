"""memkit.plan: what `memkit plan --json` prints, as a dict, and the offsets."""
import json
import subprocess

import pytest

import memkit
from conftest import SOURCE_DIR

INSTANCE = SOURCE_DIR / "tests" / "data" / "planner" / "minimalloc-challenging" / "A.1048576.csv"


def check_offsets(buffers, offsets):
    """No two buffers live at once share a byte; returns the height."""
    for i, (_, lo1, up1, s1) in enumerate(buffers):
        for j, (_, lo2, up2, s2) in enumerate(buffers[:i]):
            if lo1 < up2 and lo2 < up1:
                assert offsets[i] + s1 <= offsets[j] or offsets[j] + s2 <= offsets[i], (i, j)
    return max(o + b[3] for o, b in zip(offsets, buffers))


def test_buffers_in_memory():
    buffers = [(1, 0, 2, 100), (2, 1, 3, 50), (3, 2, 4, 100), (4, 0, 4, 10)]
    r = memkit.plan(buffers, offsets=True)
    assert (r["source"], r["buffers"], r["load_bytes"]) == ("<buffers>", 4, 160)
    assert r["optimal"] and r["fits"] and r["height_bytes"] == 160
    assert check_offsets(buffers, r["offsets"]) == 160
    as_dicts = [dict(zip(("id", "lower", "upper", "size"), b)) for b in buffers]
    assert memkit.plan(as_dicts)["height_bytes"] == 160


def test_an_instance_file_the_same_as_the_command(memkit_cli):
    # Both stop at LOAD (about 2 s); the far limit keeps a loaded machine from
    # stopping one of them short of it.
    run = subprocess.run([str(memkit_cli), "plan", "--json", "--time-limit", "120", str(INSTANCE)],
                         capture_output=True, text=True, check=True)
    expected = json.loads(run.stdout)
    got = memkit.plan(INSTANCE, time_limit=120)
    for r in (expected, got):
        r.pop("seconds")
        r.pop("search_nodes")  # restarts follow the clock
    assert got == expected
    assert got["height_bytes"] <= 1048576 and got["fits"]


def test_from_a_trace_and_written_out(tmp_path):
    out = tmp_path / "plan.csv"
    r = memkit.plan(SOURCE_DIR / "tests" / "data" / "traces" / "small.trace.csv",
                    from_trace=True, output=out)
    assert r["from_trace"] and r["output"] == str(out) and r["buffers"] == 5
    lines = out.read_text().splitlines()
    assert lines[0] == "id,lower,upper,size,offset" and len(lines) == 6


def test_below_load_does_not_fit():
    r = memkit.plan([(1, 0, 2, 100), (2, 1, 3, 100)], capacity=150, time_limit=1)
    assert r["fits"] is False and r["capacity_bytes"] == 150 and r["load_bytes"] == 200


@pytest.mark.parametrize("buffers, message", [
    ([(1, 0, 2)], r"^\[memkit.plan\] buffer 0"),
    ([(1, 0, 2, 1.5)], r"^\[memkit.plan\] buffer 0"),
    ([{"id": 1}], r"^\[memkit.plan\] buffer 0"),
])
def test_malformed_buffers(buffers, message):
    with pytest.raises(memkit.InvalidArgument, match=message):
        memkit.plan(buffers)


@pytest.mark.parametrize("buffers, message", [
    ([(1, 2, 2, 10)], "<buffers>:2: "),           # an empty lifetime
    ([(1, 0, 2, 10), (1, 1, 3, 10)], "<buffers>:3: "),  # a duplicate id
    ([(1, 0, 2, 0)], "size is 0"),
])
def test_invalid_instances_raise_planner_error(buffers, message):
    with pytest.raises(memkit.PlannerError, match=message):
        memkit.plan(buffers)


def test_bad_files_and_options(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("id,lower,upper,size\n1,0,x,4\n")
    with pytest.raises(memkit.PlannerError, match=r"^\[memkit::planner::read_instance\] .*bad.csv:2"):
        memkit.plan(bad)
    with pytest.raises(memkit.InvalidArgument, match="capacity"):
        memkit.plan(INSTANCE, capacity=0)
    with pytest.raises(memkit.InvalidArgument, match="time_limit"):
        memkit.plan(INSTANCE, time_limit=-1)
    with pytest.raises(memkit.InvalidArgument, match="is the input"):
        memkit.plan(str(INSTANCE), output=str(INSTANCE))
    with pytest.raises(memkit.InvalidArgument, match="from_trace needs a trace path"):
        memkit.plan([(1, 0, 1, 1)], from_trace=True)
