"""memkit.replay: what `memkit replay --json` prints, as dicts."""
import json
import subprocess

import pytest

import memkit
from conftest import SOURCE_DIR

# Wall-clock figures, different in every run.
TIMINGS = {"ns_per_event", "replay_ns"}


def test_small_trace(traces):
    r = memkit.replay(traces / "small.trace.csv.gz", min_capacity=True)
    assert r["completed"] is True
    assert (r["trace"], r["format"], r["backend"], r["events"], r["streams"]) == \
        ("small", "memkit", "sim", 9, 2)
    assert r["peak_live_bytes"] == 4194816
    assert r["peak_reserved_bytes"] >= r["peak_live_bytes"]
    assert r["peak_live_bytes"] <= r["min_capacity_bytes"] <= r["peak_reserved_bytes"]
    assert r["pytorch_peak_reserved_bytes"] == 4194304
    assert r["metadata"]["workload"] == "small"


@pytest.mark.parametrize("arguments, flags", [
    ({}, []),
    ({"min_capacity": True}, ["--min-capacity"]),
    ({"at_peak": True}, ["--at-peak"]),
    ({"policy": "segments", "arena_slack": 0}, ["--policy", "segments", "--arena-slack", "0"]),
    ({"device_lag": 3, "lag_seed": 7}, ["--device-lag", "3", "--lag-seed", "7"]),
    ({"backend": "cpu"}, ["--backend", "cpu"]),
    ({"capacity": 5 << 20}, ["--capacity", str(5 << 20)]),
])
def test_the_same_as_the_command(memkit_cli, traces, arguments, flags):
    path = str(traces / "small.trace.csv")
    run = subprocess.run([str(memkit_cli), "replay", "--json", *flags, path],
                         capture_output=True, text=True)
    assert run.returncode in (0, 2), run.stderr  # 2: out of memory, still reported
    expected = json.loads(run.stdout)
    got = memkit.replay(path, **arguments)
    for r in (expected, got):
        for key in TIMINGS:
            r.pop(key)
    assert got == expected


def test_several_traces_give_a_list(traces):
    results = memkit.replay([traces / "rmm_log.csv", traces / "pytorch_snapshot.json"])
    assert [r["format"] for r in results] == ["rmm", "pytorch"]
    assert [r["peak_live_bytes"] for r in results] == [6144, 2560]
    assert all("min_capacity_bytes" not in r for r in results)


def test_out_of_memory_is_reported_not_raised(traces):
    r = memkit.replay(traces / "small.trace.csv", capacity=3 << 20)
    assert r["completed"] is False
    assert "out of memory" in r["error"] and r["failed_line"] > 0


def test_a_real_pytorch_trace():
    r = memkit.replay(SOURCE_DIR / "data" / "traces" / "resnet50_train.trace.csv.gz")
    assert r["completed"] and r["allocations"] > 1000
    assert 1.0 <= r["reserved_over_live"] < r["pytorch_reserved_over_live"]


def test_html_report(traces, tmp_path):
    page = tmp_path / "report.html"
    memkit.replay(traces / "small.trace.csv", html=page)
    text = page.read_text()
    assert text.startswith("<!DOCTYPE html>") and "small" in text


@pytest.mark.parametrize("name, message", [
    ("bad_action.csv", r"^\[memkit::trace::read\] .*bad_action.csv:3: unknown action"),
    ("unknown_free.csv", r"unknown_free.csv:\d+: "),
    ("truncated.trace.csv.gz", r"truncated.trace.csv.gz"),
    ("does_not_exist.csv", r"cannot open"),
])
def test_bad_traces_raise_trace_error(traces, name, message):
    with pytest.raises(memkit.TraceError, match=message) as caught:
        memkit.replay(traces / name)
    assert isinstance(caught.value, ValueError)


@pytest.mark.parametrize("arguments, message", [
    ({"backend": "cpu", "min_capacity": True}, "min_capacity needs backend='sim'"),
    ({"backend": "cpu", "device_lag": 2}, "device_lag needs backend='sim'"),
    ({"backend": "gpu"}, "backend 'gpu'"),
    ({"policy": "x"}, "policy 'x'"),
    ({"granularity": 3}, "power of two"),
    ({"arena_slack": -1}, "arena_slack"),
])
def test_bad_options_raise_invalid_argument(traces, arguments, message):
    with pytest.raises(memkit.InvalidArgument, match=r"^\[memkit.replay\] .*" + message):
        memkit.replay(traces / "small.trace.csv", **arguments)


def test_the_report_is_not_written_over_a_trace(traces):
    with pytest.raises(memkit.InvalidArgument, match="one of the traces"):
        memkit.replay(traces / "small.trace.csv", html=traces / "small.trace.csv")
